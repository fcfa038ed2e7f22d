package runtime

import "context"

// W3C Trace Context: the HTTP server accepts a caller's `traceparent`
// header and puts it on the run's context; outbound HTTP (http_request)
// forwards it, so one trace spans the webhook and the calls it causes.

type traceparentKey struct{}

// WithTraceparent returns ctx carrying tp; an invalid tp is ignored (the
// W3C rule: a malformed header starts a new trace rather than failing).
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if !ValidTraceparent(tp) {
		return ctx
	}
	return context.WithValue(ctx, traceparentKey{}, tp)
}

// Traceparent returns the traceparent carried by ctx, or "".
func Traceparent(ctx context.Context) string {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return tp
}

// ValidTraceparent checks a version-00 traceparent:
// 2 hex version, 32 hex trace id, 16 hex parent id, 2 hex flags, lower
// case, '-' separated; the all-zero ids and version ff are invalid.
func ValidTraceparent(tp string) bool {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	version, trace, parent, flags := tp[0:2], tp[3:35], tp[36:52], tp[53:55]
	for _, part := range []string{version, trace, parent, flags} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	// Only version 00 has a fixed length of 55; ff is forbidden.
	if version != "00" {
		return false
	}
	return trace != "00000000000000000000000000000000" && parent != "0000000000000000"
}
