// Package redact removes credentials from what thindist stores or shows:
// command lines (thindist's own, lld's, the plugin's options), logs and
// messages.
//
// Two ways, used together where they can be:
//   - by syntax (Args, Text): the values of credential flags (Flags), in
//     every spelling that reaches thindist (--remote-header=K=V, the
//     two-argument --remote-header K=V, Bazel's --remote_header, lld's
//     --thinlto-distributor-arg=..., clang's -Xthinlto-distributor=...,
//     the plugin's --thindist-remote-header=...), and the password of a
//     URL's user information. This needs nothing but the text, so it also
//     cleans records written before credentials were redacted.
//   - by value (Values): the credentials the run was actually given,
//     wherever they occur, so that a message that quotes one in a form the
//     syntax does not know is cleaned too.
//
// A header is redacted whole: its key stays (which header was sent is
// useful when a service refuses a call), its value becomes Mask.
package redact

import (
	"regexp"
	"strings"
)

// Mask replaces a credential.
const Mask = "<redacted>"

// Flags are the names (without dashes, in thindist's spelling) of the flags
// whose values are credentials.
var Flags = []string{"remote-header"}

// IsCredentialFlag reports whether name (without dashes; Bazel's
// underscores accepted) is one of Flags.
func IsCredentialFlag(name string) bool {
	name = strings.ReplaceAll(name, "_", "-")
	for _, f := range Flags {
		if name == f {
			return true
		}
	}
	return false
}

// prefixes are what may stand before a thindist flag in a command line that
// passes it on: lld's and clang's distributor options, the plugin's.
var prefixes = []string{"--thinlto-distributor-arg=", "-Xthinlto-distributor=", "-Wl,--thinlto-distributor-arg="}

// flag matches a credential flag up to its value's key: "remote-header=",
// "remote_header ", the plugin's "thindist-remote-header=". Group 1 is all
// before the key, group 2 the key.
const flag = `((?:^|[^A-Za-z0-9_-])-{0,2}(?:thindist-)?remote[-_]header[= ]+)([^=\s"']+)=`

// flagText matches a credential flag and its value in a line of text,
// where the value runs to the next white space or quote (past an
// authorization scheme: "Bearer TOKEN").
var flagText = regexp.MustCompile(flag + `(?i:(?:bearer|basic|token) +)?[^\s"']*`)

// flagArg matches a credential flag and its value in one argument, where
// the value runs to the argument's end.
var flagArg = regexp.MustCompile(flag + `.*$`)

// flagAlone matches an argument that is a credential flag whose value is
// the next argument (after a prefix, when passed on).
var flagAlone = regexp.MustCompile(`^(?:` + prefixAlternation() + `)?-{1,2}(?:thindist-)?remote[-_]header$`)

// urlUser matches the password of a URL's user information:
// scheme://user:PASSWORD@host.
var urlUser = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"']*:)[^/\s@"']+@`)

func prefixAlternation() string {
	q := make([]string, len(prefixes))
	for i, p := range prefixes {
		q[i] = regexp.QuoteMeta(p)
	}
	return strings.Join(q, "|")
}

// Text returns s with the values of credential flags and URL passwords
// replaced by Mask.
func Text(s string) string {
	if !strings.Contains(s, "header") && !strings.Contains(s, "@") {
		return s // the common case, without a regular expression
	}
	s = flagText.ReplaceAllString(s, "${1}${2}="+Mask)
	return urlUser.ReplaceAllString(s, "${1}"+Mask+"@")
}

// Args returns a copy of a command line with the values of credential
// flags and URL passwords replaced by Mask, in each argument and where a
// credential flag takes the next argument as its value. args itself is
// not changed.
func Args(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = urlUser.ReplaceAllString(flagArg.ReplaceAllString(a, "${1}${2}="+Mask), "${1}"+Mask+"@")
		if i > 0 && flagAlone.MatchString(args[i-1]) {
			out[i] = value(a)
		}
	}
	return out
}

// value redacts an argument that is a credential flag's value on its own:
// KEY=VALUE, possibly behind a prefix that passes it on.
func value(a string) string {
	prefix := ""
	for _, p := range prefixes {
		if strings.HasPrefix(a, p) {
			prefix, a = p, a[len(p):]
			break
		}
	}
	if k, _, ok := strings.Cut(a, "="); ok {
		return prefix + k + "=" + Mask
	}
	return prefix + Mask
}

// Values replaces given credentials wherever they occur. The zero value
// replaces nothing.
type Values struct{ r *strings.Replacer }

// minValue is the shortest credential replaced by value: a shorter one
// ("1", "on") would replace unrelated text throughout, and is left to the
// syntax, which finds it after its flag.
const minValue = 6

// NewValues returns the Values that replace each of secrets by Mask
// (those shorter than minValue are left to the syntax).
func NewValues(secrets ...string) Values {
	var pairs []string
	for _, s := range secrets {
		if len(s) >= minValue {
			pairs = append(pairs, s, Mask)
		}
	}
	if len(pairs) == 0 {
		return Values{}
	}
	return Values{strings.NewReplacer(pairs...)}
}

// String returns s with every given credential replaced, then redacted by
// syntax (Text).
func (v Values) String(s string) string {
	if v.r != nil {
		s = v.r.Replace(s)
	}
	return Text(s)
}

// Args returns a copy of args with every given credential replaced, then
// redacted by syntax (Args).
func (v Values) Args(args []string) []string {
	if args == nil {
		return nil
	}
	out := make([]string, len(args))
	for i, a := range args {
		if v.r != nil {
			a = v.r.Replace(a)
		}
		out[i] = a
	}
	return Args(out)
}
