package validation

import (
	"fmt"
	"strings"

	"github.com/snapkeeper/snapkeeper/pkg/snapshot"
)

// Helpers only the rules need, over the wire contract's parameter keys and
// templates (pkg/snapshot/params.go).

// templateTokens returns the ${...} tokens of a secret parameter value, in
// order, each with its "${" and "}". An unterminated "${" is an error because
// the controller would pass it through literally and look up a secret whose
// name can never exist.
func templateTokens(value string) ([]string, error) {
	var tokens []string
	rest := value
	for {
		start := strings.Index(rest, "${")
		if start < 0 {
			return tokens, nil
		}
		end := strings.IndexByte(rest[start:], '}')
		if end < 0 {
			return tokens, fmt.Errorf("unterminated template %q", rest[start:])
		}
		tokens = append(tokens, rest[start:start+end+1])
		rest = rest[start+end+1:]
	}
}

// sampleTemplateVars are representative values, valid as names, used to check
// that the literal parts around template tokens still form a valid name once
// the tokens are resolved.
var sampleTemplateVars = snapshot.TemplateVars{
	ContentName:       "snapcontent-0",
	SnapshotNamespace: "ns",
	SnapshotName:      "snap",
}

// knownClassParamKeys lists every reserved class parameter key we understand,
// in the order of snapshot.SecretParamPairs: for messages that tell the user what to
// write instead of a misspelt key.
func knownClassParamKeys() []string {
	keys := make([]string, 0, 2*len(snapshot.SecretParamPairs))
	for _, p := range snapshot.SecretParamPairs {
		keys = append(keys, p.NameKey, p.NamespaceKey)
	}
	return keys
}
