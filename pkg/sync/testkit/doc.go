// Package testkit is what the unit tests of the two controllers in
// pkg/sync (binder and csiside) share: API, a fake of the API server over
// the fake clientsets of client-go and of the snapshot client, and the
// builders of the objects those tests put into it (Snapshot, Content,
// SnapshotClass, BoundClaim, Secret), with functional options:
//
//	vs := testkit.Snapshot("s1", testkit.ClassName("gold"))
//	c := testkit.Content("c1", testkit.RefTo(vs.Namespace, vs.Name, vs.UID), testkit.Ready("h1"))
//	api := testkit.NewAPI(t, vs, c)
//
// Only tests import it; product code must not (it is no part of the
// controller binaries). The end-to-end tests under test/ run a real API
// server instead, and pkg/csi/csitest a real mock CSI driver.
package testkit
