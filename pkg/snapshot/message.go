package snapshot

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxMessageBytes bounds a message the controllers store in a status error
// or send as an event: a driver may answer with a whole stack trace, and a
// message of megabytes would make every status write of the object fail
// (etcd's request limit) and retry without ever showing anything. It is the
// size of an events.k8s.io note.
const MaxMessageBytes = 1024

// TrimMessage trims space around s and cuts it to at most MaxMessageBytes,
// on a character boundary, saying how long it was.
func TrimMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= MaxMessageBytes {
		return s
	}
	mark := " [cut: " + strconv.Itoa(len(s)) + " bytes in all]"
	cut := MaxMessageBytes - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
