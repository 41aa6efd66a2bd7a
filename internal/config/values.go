package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A setting's value checks itself in its Set, the one validation every
// source goes through: a flag (the error names it, --jobs), a THINDIST_*
// variable (THINDIST_JOBS) and a config-file line (FILE:LINE: jobs). Each
// Set error reads `bad value "x" (want ...)`.

// badValue is the error of a Set that refuses s; want says what it takes.
func badValue(s, want string) error {
	return fmt.Errorf("bad value %q (want %s)", s, want)
}

// intValue is an integer flag of at least min.
type intValue struct {
	p   *int
	min int
	// want says what is taken ("a number of at least 1").
	want string
}

func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < v.min {
		return badValue(s, v.want)
	}
	*v.p = n
	return nil
}

// boolValue is a boolean flag.
type boolValue struct{ p *bool }

func (v boolValue) String() string   { return strconv.FormatBool(v.p != nil && *v.p) }
func (v boolValue) IsBoolFlag() bool { return true }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return badValue(s, "true or false")
	}
	*v.p = b
	return nil
}

// choiceValue is a string flag that takes one of a few words.
type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v choiceValue) Set(s string) error {
	t := strings.TrimSpace(s)
	for _, c := range v.choices {
		if t == c {
			*v.p = t
			return nil
		}
	}
	return badValue(s, orList(v.choices))
}

// orList spells words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// sizeValue is a size flag (ParseSize), kept as the user spelled it.
type sizeValue struct{ p *string }

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v sizeValue) Set(s string) error {
	if _, err := ParseSize(s); err != nil {
		return badValue(s, "a size such as 500M or 10G")
	}
	*v.p = strings.TrimSpace(s)
	return nil
}

// durationValue is a time.Duration flag of 0 or more.
type durationValue struct{ p *time.Duration }

func (d durationValue) String() string {
	if d.p == nil {
		return ""
	}
	return d.p.String()
}

// Set takes a Go duration (30s, 2m, 1h30m) or, as Bazel's
// --remote_timeout does, a number of seconds.
func (d durationValue) Set(s string) error {
	t := strings.TrimSpace(s)
	if n, err := strconv.Atoi(t); err == nil && n >= 0 {
		*d.p = time.Duration(n) * time.Second
		return nil
	}
	v, err := time.ParseDuration(t)
	if err != nil || v < 0 {
		return badValue(s, "a duration such as 30s, 2m or 1h30m, or a number of seconds")
	}
	*d.p = v
	return nil
}
