// Package testkit is what the unit tests of the two controllers in
// pkg/sync (binder and csiside) share: API, a fake of the API server over
// the fake clientsets of client-go and of the snapshot client, and the
// builders of the objects those tests put into it (Snapshot, Content,
// SnapshotClass, their group counterparts GroupSnapshot, GroupContent and
// GroupClass, BoundClaim, Secret), with functional options:
//
//	vs := testkit.Snapshot("s1", testkit.ClassName("gold"))
//	c := testkit.Content("c1", testkit.RefTo(vs.Namespace, vs.Name, vs.UID), testkit.Ready("h1"))
//	api := testkit.NewAPI(t, vs, c)
//
// The lifecycle of both controllers is written once over the two kinds, and
// an option of a rule both kinds have fits both builders of a pair:
// testkit.GroupContent("gc1", testkit.RefTo(g.Namespace, g.Name, g.UID),
// testkit.Ready("h1")) is the same case for a group.
//
// Only tests import it; product code must not (it is no part of the
// controller binaries). The end-to-end tests under test/ run a real API
// server instead, and pkg/csi/csitest a real mock CSI driver.
package testkit
