package snapshot

import (
	"fmt"
	"strings"
)

// TemplateTokens returns the ${...} tokens of a secret parameter value, in
// order, each with its "${" and "}". An unterminated "${" is an error because
// the controller would pass it through literally and look up a secret whose
// name can never exist.
func TemplateTokens(value string) ([]string, error) {
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

// SampleTemplateVars are representative values, valid as names, used to check
// that the literal parts around template tokens still form a valid name once
// the tokens are resolved.
var SampleTemplateVars = TemplateVars{
	ContentName:       "snapcontent-0",
	SnapshotNamespace: "ns",
	SnapshotName:      "snap",
}

// KnownClassParamKeys lists every reserved class parameter key we understand,
// in the order of SecretParamPairs: for messages that tell the user what to
// write instead of a misspelt key.
func KnownClassParamKeys() []string {
	keys := make([]string, 0, 2*len(SecretParamPairs))
	for _, p := range SecretParamPairs {
		keys = append(keys, p.NameKey, p.NamespaceKey)
	}
	return keys
}
