package main

const costModel = `## Cost model: which writes a snapshot needs, and why

snapkeeper, dynamic snapshot with Delete policy, create, a driver that answers ready at once (9 writes; the
user's create is not counted). Two of them (4 and 5) were not there before the drop-in work: they are what
the community controllers do and what a cluster mixing them with ours relies on (docs/contract.md):

| # | write | why it cannot go |
|---|---|---|
| 1 | patch VolumeSnapshot: add ` + "`volumesnapshot-as-source-protection`" + ` and ` + "`volumesnapshot-bound-protection`" + `, and the resolved default class in ` + "`spec.volumeSnapshotClassName`" + ` | the snapshot must not vanish while a content (and a backend snapshot) exists for it; the class must be recorded before the content is made so a later default change cannot alter it |
| 2 | update PVC: add ` + "`pvc-as-source-protection`" + ` (sent together with 1: neither depends on the other; an update, because the community's role grants no patch on claims) | the volume must not be deleted while a cut may be in flight |
| 3 | create VolumeSnapshotContent ` + "`snapcontent-<uid>`" + `, born with ` + "`volumesnapshotcontent-bound-protection`" + ` | the record that a backend snapshot may exist, written before CreateSnapshot is sent |
| 4 | patch VolumeSnapshot status: ` + "`boundVolumeSnapshotContentName`" + `, ` + "`readyToUse: false`" + ` | as the community binder does right after creating the content: the user sees the binding even when no CSI side runs for the driver; a status subresource write, so it cannot ride on 1 |
| 5 | patch content: the ` + "`volumesnapshot-being-created`" + ` mark (CSI side, right before CreateSnapshot) | a call whose answer is lost must be finished before the content may be deleted; the content is not born marked, so that a content whose CSI side never runs can still be deleted and an early deletion costs no CreateSnapshot |
| 6 | patch content status (handle, creationTime, restoreSize, readyToUse) | the backend's answer, the only durable record of the handle |
| 7 | patch content: remove the being-created mark | the cut is no longer in flight; only after 6, or a deletion in between could forget the snapshot |
| 8 | patch VolumeSnapshot status once ready (handle, time, size, ready) | what users and backup tools read |
| 9 | update PVC: remove ` + "`pvc-as-source-protection`" + ` | the snapshot is ready: the PVC may be deleted again |

A driver that answers "not ready" first adds two writes, each once whatever the upload takes: the
VolumeSnapshot status with ` + "`creationTime`" + ` when the cut is recorded (what a freeze/thaw backup waits for), and
the content status when a poll finds it ready. Polls that change nothing write nothing (the slow-driver table).

Plus one Normal event on the VolumeSnapshot when it becomes ready.

Deletion (the user's delete is not counted): patch the content with the ` + "`volumesnapshot-being-deleted`" + ` mark
(the CSI side may only delete once the API server holds it), delete the content, remove the content's
finalizer after DeleteSnapshot succeeded (the API server then removes the content), and release the
VolumeSnapshot (remove its finalizers) once the content is gone.

The community pair measured above does the same job with the writes listed in the per-resource tables:
separate writes for each finalizer, an update of the content to add the being-created annotation and
another to remove it, status updates of the snapshot before and after it is ready, and three events
(CreatingSnapshot, SnapshotCreated, SnapshotReady).

`

const method = `## How it is measured

- **API writes** are deltas of kube-apiserver's ` + "`apiserver_request_total`" + ` (verbs POST, PUT, PATCH, APPLY,
  DELETE, DELETECOLLECTION; every response code, so conflicts and retries cost what they cost), scraped
  from its ` + "`/metrics`" + ` with the admin token. The same counter serves every system, ours and the community's.
  A window opens when no write has happened for the quiet period (` + "`-quiet`" + `, so start-up writes stay
  out) and closes when writes have stopped again after the goal was reached (so trailing writes, like
  the PVC finalizer removal after the snapshot is ready, are in). The benchmark's own writes in a window
  (the N creates or deletes) go through a transport that counts every request, retries included, and are
  subtracted exactly. Leases are ignored: the API server renews its own identity Lease on a timer, and no
  system here runs leader election (snapkeeper's CSI side renews a heartbeat Lease per driver on a timer, not per snapshot: not counted). Reviews (SelfSubjectAccessReview and the like, POSTs that store nothing) are not writes either. Events are writes to ` + "`events`" + ` (core and events.k8s.io); "events per
  snapshot" counts emitted events: creates (POST) plus the patches by which client-go's event correlator
  folds a repeat of the same event into the existing object (its ` + "`count`" + `); the event table lists them by
  object kind and reason from the event objects' counts.
- **The control plane** is production-like unless a flag says otherwise: etcd syncs every write to disk
  (` + "`-unsafe-no-fsync`" + ` turns that off, and the machine table then says so), and kube-apiserver runs with its
  default API Priority and Fairness configuration and its default ` + "`--max-requests-inflight`" + ` (400) and
  ` + "`--max-mutating-requests-inflight`" + ` (200): requests beyond a priority level's share wait in its queues
  and are rejected with 429 when those are full.
- **Identities**: every controller process and the webhook authenticate with a ServiceAccount token of their
  own from the TokenRequest API, bound only to the RBAC they ship with: snapkeeper's ClusterRoles and Roles are
  rendered from ` + "`charts/snapkeeper`" + ` with ` + "`bin/helm template`" + ` (the binder as the controller's account, the CSI
  side as a driver pod's account bound through ` + "`csiSide.rbac`" + `), the community pair's are the manifests in
  ` + "`deploy/kubernetes`" + ` of its Go module, applied unchanged. snapkeeper runs as the chart deploys it: the
  binder and the CSI side as two processes (` + "`--components=binder`" + `, ` + "`--components=csi`" + `), each with its
  defaults, and ` + "`--leader-election-namespace`" + ` set to its account's namespace, which a pod reads from its
  mounted token. Log lines in which the API server refused a controller something are reported as notes.
  The benchmark's own client (load generator, watcher, metrics scraper) is admin and exempt from APF.
  ` + "`-admin-controllers`" + ` runs the controllers as admin instead (system:masters, exempt from APF).
- **Repeats**: the scenario runs ` + "`-repeats`" + ` times per system, the systems interleaved (ours, then each
  community configuration, then ours again, ...) so that a change of the machine's load falls on all of them;
  the summary gives median, min and max and the ratio of the medians, the detail tables the median run.
- **Push-back**: 429s are the delta of ` + "`apiserver_request_total{code=\"429\"}`" + ` over every verb, and APF's
  own ` + "`apiserver_flowcontrol_rejected_requests_total`" + ` by priority level and reason, in the measured windows.
  Client-side throttling is the controllers' ` + "`rest_client_rate_limiter_duration_seconds`" + ` where they expose
  it; where none does, the table says "not exposed" and the waiting shows only in the times (at QPS 5 the
  community pair's time is mostly its own rate limiter's).
- **Analysis**: the Analysis section is generated from the figures of the same run (ratios of medians, the
  fastest system, writes per snapshot against the cost model's 7); nothing in the file is kept by hand.
- **Times** run from the first create (or delete) request to the moment the benchmark's informer sees the
  last snapshot ready (or the last snapshot and content gone, and the driver's ` + "`/snapshots`" + ` is empty).
- **CSI calls** are the mock driver's own counters by method and code. By default the driver answers at
  once and every snapshot is ready in its first answer; ` + "`-csi-latency`" + ` adds 200 ms to each CreateSnapshot
  and 50 ms to each ListSnapshots, and ` + "`-csi-ready-after=5s-30s`" + ` makes the driver answer readyToUse=false
  about a snapshot until a time between the two (fixed per snapshot) has passed since its first answer, so
  the CSI calls and writes per snapshot show what each system spends while it waits.
- **CPU** is utime + stime from ` + "`/proc/<pid>/stat`" + ` of the controller process(es) over the window (until writes
  stopped); **peak RSS** is ` + "`VmHWM`" + ` from ` + "`/proc/<pid>/status`" + `, summed over the two processes of each system.
- **Raw write ceiling**: on each system's fresh control plane, before anything else, ` + "`-ceiling-ops`" + ` ConfigMaps
  are created and then merge-patched from ` + "`-ceiling-concurrency`" + ` goroutines with no client-side limit;
  writes/s is the physical limit of this API server on this machine. The same is then done with
  VolumeSnapshots in a namespace of their own (deleted again before any controller starts), the price of
  a write to a snapshot CRD.
- The community pair is external-snapshotter COMMUNITY_VERSION (snapshot-controller and csi-snapshotter), built from
  its Go module in ` + "`hack/tools/peers`" + ` with every k8s.io module at v0.37.2, started with ` + "`--kubeconfig`" + `,
  ` + "`--http-endpoint`" + `, ` + "`--leader-election=false`" + ` (and ` + "`--csi-address`" + ` for the sidecar): at its
  defaults (QPS 5, burst 10, 10 workers), tuned (QPS 100, burst 200, 100 workers) and with snapkeeper's
  defaults as read from the built controller's ` + "`-h`" + ` (community-equal).
- **Scale** (` + "`-scale`" + `, ` + "`-scale-systems`" + `): the scenario ` + "`-scale-repeats`" + ` times per N and system (every N of
  every system, then again; the tables show the median run by time to all-ready, and a table over the repeats
  gives each phase's own median, min and max and the growth of the medians), on a fresh control plane each,
  with its own ceiling measurement (its floor) and the plain driver. Up to ` + "`-scale-dynamic-max`" + ` the snapshots are created
  through the system; above it they are seeded ready (as for the cold start) and the system's start over them
  replaces the create phase. Growth per 10× N is (figure at N₂ ÷ figure at N₁)^(1 ÷ log₁₀(N₂ ÷ N₁)).
- **Restart and cold start**: the window opens when the new processes start and closes once no API write has
  happened and the controllers' CPU stayed under 5% of a core (sampled every quarter of ` + "`-quiet`" + `) for
  ` + "`-quiet`" + `, and not before ` + "`-steady-idle`" + `; "idle" is the last write or busy sample. For the cold start, the
  objects are written by the benchmark's admin client (` + "`-seed-concurrency`" + ` goroutines, no client-side limit,
  statuses through the status subresource), and the mock driver is given every handle by a CreateSnapshot under
  the name a controller would use; the systems start one after the other over the same objects. Memory per
  snapshot is the summed VmHWM of the processes over M snapshots minus their VmHWM when started over none on
  the same control plane, divided by M.
- **Waits per snapshot**: at both ends of each window the benchmark reads the sums and counts of our
  controllers' histograms (queue wait and sync time per work loop, API round trips by verb, client-side
  limiter, the watch delay from a write's answer to its informer event, CSI calls, retry backoff; each process's
  ` + "`/metrics`" + `) and the API server's (` + "`apiserver_request_duration_seconds`" + ` of writes,
  ` + "`apiserver_flowcontrol_request_wait_duration_seconds`" + ` outside the exempt level); the differences divided by N
  are the table's rows. CPU in cores and the machine's busy share come from ` + "`/proc/<pid>/stat`" + ` of each process and
  ` + "`/proc/stat`" + ` between the first request and all-ready (all-gone). "What dominates" names the largest of our own
  waits (syncs contain their calls, so they are not candidates).
- **One snapshot alone** (` + "`-single`" + `): on a fresh control plane per system, before the controllers start, 100
  sequential merge patches of one VolumeSnapshot and of one ConfigMap by the admin price one write (5 more
  first, not counted); then each snapshot is created, seen ready by the benchmark's informer, deleted and seen
  gone (with the driver empty) before the next. The limit is the cost model's writes times the p50 of one
  CRD write: 9 for the create, 4 for the delete.
- **Baseline** (` + "`-baseline <commit>`" + `): our controller as built at that commit (a temporary git worktree) is
  the system ` + "`ours-baseline`" + `, interleaved with the others like any of them.
- **While the driver says not ready** (` + "`-waiting`" + `, its own stage): the mock's call log is read during the create
  phase; a snapshot's interval runs from the driver's first answer about it until that answer's time plus its
  delay (the mock's own hash spread, mirrored in test/bench/waiting.go) and is split where the VolumeSnapshot's
  informer first sees ` + "`status.creationTime`" + `; changes to the snapshot's objects are the updates the benchmark's
  informers see (each one a write that changed the object).
- **Admission through the API server**: dry-run creates sent by ServiceAccounts of the bench namespace
  (TokenRequest tokens, a Role allowing the two creates), so APF queues and may reject them; 429s are the delta of
  ` + "`apiserver_request_total{code=\"429\"}`" + ` over the row, the priority level the delta of
  ` + "`apiserver_flowcontrol_dispatched_requests_total`" + `.
- With ` + "`-community-default-n`" + ` smaller than N, the default-flag community run is measured at that size and
  its times are extrapolated linearly to N (its time is client-side waiting at QPS 5, proportional to the
  number of writes); per-snapshot figures are measured, not extrapolated.
`
