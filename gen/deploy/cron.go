package deploy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// translateCron turns a workflow cron expression (robfig/cron syntax,
// docs/triggers.md) into a Kubernetes CronJob schedule and a systemd
// OnCalendar expression. Only what both express with the same meaning is
// accepted; anything else is an error that names what to change, never an
// approximation that fires at other times.
func translateCron(expr string) (Schedule, error) {
	sc := Schedule{Source: expr}
	rest := strings.TrimSpace(expr)
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(rest, p) {
			zone, after, ok := strings.Cut(rest[len(p):], " ")
			if !ok || zone == "" {
				return sc, errors.New("time zone prefix without a schedule")
			}
			sc.TimeZone, rest = zone, strings.TrimSpace(after)
			break
		}
	}
	if strings.HasPrefix(rest, "@") {
		var cal string
		switch rest {
		case "@yearly", "@annually":
			cal = "*-01-01 00:00:00"
		case "@monthly":
			cal = "*-*-01 00:00:00"
		case "@weekly":
			cal = "Sun *-*-* 00:00:00"
		case "@daily", "@midnight":
			cal = "*-*-* 00:00:00"
		case "@hourly":
			cal = "*-*-* *:00:00"
		default:
			return sc, fmt.Errorf("%s has no CronJob or systemd timer equivalent; use a 5-field expression (or an interval trigger, which deploys as a service)", rest)
		}
		sc.Cron, sc.OnCalendar = rest, withZone(cal, sc.TimeZone)
		return sc, nil
	}
	f := strings.Fields(rest)
	switch len(f) {
	case 5:
	case 6: // seconds first: Kubernetes has no seconds, so only 0 fits.
		if f[0] != "0" {
			return sc, errors.New("a seconds field other than 0 has no CronJob equivalent")
		}
		f = f[1:]
	default:
		return sc, fmt.Errorf("want 5 or 6 fields, got %d", len(f))
	}
	sc.Cron = strings.Join(f, " ")
	if f[2] != "*" && f[4] != "*" {
		// cron fires when either day field matches, systemd when both do.
		return sc, errors.New("day-of-month and day-of-week both restricted: cron and systemd read that differently; restrict only one")
	}
	min, err := calField(f[0], 0, 59, nil)
	if err != nil {
		return sc, fmt.Errorf("minute: %v", err)
	}
	hour, err := calField(f[1], 0, 23, nil)
	if err != nil {
		return sc, fmt.Errorf("hour: %v", err)
	}
	dom, err := calField(f[2], 1, 31, nil)
	if err != nil {
		return sc, fmt.Errorf("day of month: %v", err)
	}
	mon, err := calField(f[3], 1, 12, nil)
	if err != nil {
		return sc, fmt.Errorf("month: %v", err)
	}
	cal := fmt.Sprintf("*-%s-%s %s:%s:00", mon, dom, hour, min)
	if f[4] != "*" {
		days := []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
		dow, err := calField(f[4], 0, 6, days)
		if err != nil {
			return sc, fmt.Errorf("day of week: %v", err)
		}
		cal = dow + " " + cal
	}
	sc.OnCalendar = withZone(cal, sc.TimeZone)
	return sc, nil
}

func withZone(cal, zone string) string {
	if zone == "" {
		return cal
	}
	return cal + " " + zone
}

// calField translates one numeric cron field: *, N, A-B, */S, N/S and
// comma lists of those. names, when set, renders values as names (days
// of the week), where systemd has no steps.
func calField(field string, lo, hi int, names []string) (string, error) {
	if field == "*" {
		return "*", nil
	}
	num := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%q is not a number from %d to %d", s, lo, hi)
		}
		return n, nil
	}
	show := func(n int) string {
		if names != nil {
			return names[n]
		}
		if lo == 0 {
			return fmt.Sprintf("%02d", n)
		}
		return strconv.Itoa(n)
	}
	var out []string
	for _, item := range strings.Split(field, ",") {
		base, step, stepped := strings.Cut(item, "/")
		if stepped {
			if names != nil {
				return "", fmt.Errorf("step %q is not supported here", item)
			}
			s, err := strconv.Atoi(step)
			if err != nil || s < 1 {
				return "", fmt.Errorf("step %q is not a positive number", step)
			}
			start := lo
			if base != "*" {
				if strings.Contains(base, "-") {
					return "", fmt.Errorf("a stepped range %q has no systemd equivalent", item)
				}
				if start, err = num(base); err != nil {
					return "", err
				}
			}
			out = append(out, fmt.Sprintf("%s/%d", show(start), s))
			continue
		}
		if a, b, ok := strings.Cut(base, "-"); ok {
			x, err := num(a)
			if err != nil {
				return "", err
			}
			y, err := num(b)
			if err != nil {
				return "", err
			}
			if x > y {
				return "", fmt.Errorf("range %q runs backwards", base)
			}
			if names != nil && x == 0 { // systemd's week starts on Monday
				out = append(out, names[0])
				if x++; x > y {
					continue
				}
			}
			out = append(out, show(x)+".."+show(y))
			continue
		}
		n, err := num(base)
		if err != nil {
			return "", err
		}
		out = append(out, show(n))
	}
	return strings.Join(out, ","), nil
}
