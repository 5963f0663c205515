package testkit

import "strings"

// Kind is one of the two kinds a lifecycle written once runs over (a
// snapshot kind and a group kind), for table cases written once in the
// snapshot kind's words. Each package's tests embed it in their own kind,
// which builds that package's objects.
type Kind struct {
	Name  string
	Group bool
	// words turns a text in the snapshot kind's words into the group
	// kind's (nil for the snapshot kind).
	words *strings.Replacer
}

// Kinds are the snapshot kind and the group kind, whose words are the
// pairs (snapshot's, group's) of groupWords.
func Kinds(groupWords ...string) (snapshot, group Kind) {
	return Kind{Name: "snapshot"}, Kind{Name: "group", Group: true, words: strings.NewReplacer(groupWords...)}
}

// Says is s, written in the snapshot kind's words, in k's words.
func (k Kind) Says(s string) string {
	if k.words == nil {
		return s
	}
	return k.words.Replace(s)
}

// SaysAll is Says of each of ss.
func (k Kind) SaysAll(ss ...string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, k.Says(s))
	}
	return out
}
