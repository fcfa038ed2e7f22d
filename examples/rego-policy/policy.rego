# The decision every tool call the static allowlists allow must also pass.
# input is {"tool": "fs.read", "args": {"path": "..."}} (docs/policy.md);
# data holds [policy.rego].data.
package agent

default allow := false

# The reference's example: reads only under the safe prefix...
allow if {
	input.tool == "fs.read"
	startswith(input.args.path, data.safe_prefix)
}

# ...and HTTP requests only as POST ([policy.http] still caps the URLs;
# this workflow declares none, so every request is denied before Rego).
allow if {
	input.tool == "http.request"
	input.args.method == "POST"
}

# Summaries are written as .txt files only.
allow if {
	input.tool == "fs.write"
	endswith(input.args.path, ".txt")
}
