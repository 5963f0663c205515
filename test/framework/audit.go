package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The production plane's API servers keep an audit log of every write to
// the snapshot APIs and to Leases, so a fault scenario can tell which
// writes a server accepted, when, and from whom. Controller replicas
// authenticate as seat users (SeatToken), so each write names the replica
// seat that sent it.

// Seats is how many seat users the token file knows.
const Seats = 4

// SeatUser is the user name of replica seat i.
func SeatUser(i int) string { return fmt.Sprintf("snapkeeper-seat-%d", i) }

// SeatToken is the bearer token of SeatUser(i), in group system:masters.
func SeatToken(i int) string { return fmt.Sprintf("snapkeeper-seat-%d-token", i) }

func seatTokens() string {
	var b strings.Builder
	for i := range Seats {
		fmt.Fprintf(&b, "%s,%s,%s,system:masters\n", SeatToken(i), SeatUser(i), SeatUser(i))
	}
	return b.String()
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: snapshot.storage.k8s.io
  - group: groupsnapshot.storage.k8s.io
  - group: coordination.k8s.io
    resources: ["leases"]
- level: None
`

// auditArgs are the audit flags of API server i.
func (cp *ControlPlane) auditArgs(i int) []string {
	policy := filepath.Join(cp.Dir, "audit-policy.yaml")
	_ = os.WriteFile(policy, []byte(auditPolicy), 0o644)
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + cp.auditPath(i),
		"--audit-log-mode=blocking",
	}
}

func (cp *ControlPlane) auditPath(i int) string {
	return filepath.Join(cp.Dir, fmt.Sprintf("audit-%d.log", i))
}

// AuditEvent is one audited request, as far as the scenarios need it.
type AuditEvent struct {
	Server    int       `json:"-"` // which API server logged it
	Stage     string    `json:"stage"`
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Done      time.Time `json:"stageTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Accepted reports whether the server carried the write out.
func (e AuditEvent) Accepted() bool {
	return e.Stage == "ResponseComplete" && e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300
}

func (e AuditEvent) String() string {
	sub := ""
	if e.ObjectRef.Subresource != "" {
		sub = "/" + e.ObjectRef.Subresource
	}
	return fmt.Sprintf("%s %s %s%s %s/%s -> %d (server %d, received %s, done %s)", e.User.Username, e.Verb,
		e.ObjectRef.Resource, sub, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code, e.Server,
		e.Received.Format("15:04:05.000"), e.Done.Format("15:04:05.000"))
}

// AuditEvents reads the completed requests every API server of the
// production plane has logged so far.
func (cp *ControlPlane) AuditEvents() ([]AuditEvent, error) {
	var out []AuditEvent
	for i := range cp.servers {
		f, err := os.Open(cp.auditPath(i))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e AuditEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" {
				continue
			}
			e.Server = i
			out = append(out, e)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
