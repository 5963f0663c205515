package snapshot

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTrimMessage(t *testing.T) {
	if got := TrimMessage("  short  "); got != "short" {
		t.Errorf("short message: %q", got)
	}
	exact := strings.Repeat("x", MaxMessageBytes)
	if got := TrimMessage(exact); got != exact {
		t.Errorf("a message of exactly the limit was changed to %d bytes", len(got))
	}
	for _, long := range []string{
		strings.Repeat("e", 1<<20),
		strings.Repeat("é", 3000),               // two bytes a character
		strings.Repeat("界", 2000),               // three
		"Internal: " + strings.Repeat("🙂", 900), // four
	} {
		got := TrimMessage(long)
		if len(got) > MaxMessageBytes || !utf8.ValidString(got) {
			t.Errorf("%d-byte message cut to %d bytes, valid UTF-8 %v", len(long), len(got), utf8.ValidString(got))
		}
		if !strings.HasPrefix(long, got[:strings.LastIndex(got, " [cut: ")]) {
			t.Errorf("cut message is not a prefix of the original")
		}
		if !strings.Contains(got, "bytes in all]") {
			t.Errorf("cut message does not say it was cut: %q", got[len(got)-40:])
		}
	}
}
