#!/bin/sh
# Helm post-renderer: copies the rendered manifest from stdin to stdout
# without its CustomResourceDefinitions. Used to take the snapshot CRDs out of
# an old release (for example the piraeus snapshot-controller chart) so that
# uninstalling that release cannot delete them; see the chart's README.
exec awk '
function flush() {
	if (doc !~ /(^|\n)kind:[ \t]*CustomResourceDefinition[ \t]*(\n|$)/) printf "%s", doc
	doc = ""
}
/^---/ { flush() }
{ doc = doc $0 "\n" }
END { flush() }
'
