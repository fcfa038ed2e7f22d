package draft

import (
	"strconv"
	"strings"
)

// Extract returns the workflow TOML of a model reply: the first fenced
// block labelled toml (or unlabelled), else the whole reply when it has no
// fence at all. ok is false when there is nothing to read.
func Extract(reply string) (string, bool) {
	var (
		open, want, fenced bool
		block              strings.Builder
	)
	for _, line := range strings.Split(strings.TrimSuffix(reply, "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = true
			if open {
				if want {
					return block.String(), strings.TrimSpace(block.String()) != ""
				}
				open = false
				continue
			}
			info := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(trimmed, "```")))
			open, want = true, info == "" || info == "toml"
			continue
		}
		if open && want {
			block.WriteString(line)
			block.WriteByte('\n')
		}
	}
	if open && want { // an unclosed last fence still counts
		return block.String(), strings.TrimSpace(block.String()) != ""
	}
	if fenced {
		return "", false
	}
	s := strings.TrimSpace(reply)
	if s == "" {
		return "", false
	}
	return s + "\n", true
}

// Header is the comment block every draft starts with. The goal is quoted
// as a Go string literal (ASCII only, every control character and newline
// escaped), so no goal can end the comment and inject TOML.
func Header(goal string) string {
	var b strings.Builder
	b.WriteString("# DRAFT drafted by `kiln draft` from a goal, by an intelligence backend.\n")
	b.WriteString("# It must be reviewed by a person (see the .review.md beside it) before it is\n")
	b.WriteString("# built and signed (`kiln build`); nothing in it has been run.\n")
	b.WriteString("# goal: ")
	b.WriteString(strconv.QuoteToASCII(goal))
	b.WriteString("\n\n")
	return b.String()
}

// headerLines is how many lines Header adds before the model's TOML.
func headerLines(h string) int { return strings.Count(h, "\n") }
