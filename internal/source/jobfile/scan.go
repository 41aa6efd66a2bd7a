package jobfile

import "encoding/json"

// scanLLD decodes a job file in lld's schema in one pass over data.
//
// The general path (parse) decodes the file into maps of raw values, then
// each value again, so encoding/json reads every byte several times, on
// the link's critical path. This path reads each byte once and slices
// plain strings out of data (see docs/design.md, "Job file fast path").
//
// It reports ok = false for anything else: a file in the RFC's v0 schema,
// a null, a field of another type, a key given twice, malformed JSON. Parse
// then takes the general path, which accepts every file this one does, with
// the same result (FuzzParse checks that), and names what is wrong.
func scanLLD(data []byte) (sh *lldShape, ok bool) {
	s := scanner{data: data}
	sh = &lldShape{}
	var haveCommon, haveJobs bool
	ok = s.object(func(key string) bool {
		switch key {
		case "common":
			if haveCommon {
				return false
			}
			haveCommon = true
			return s.common(sh)
		case "jobs":
			if haveJobs {
				return false
			}
			haveJobs = true
			return s.jobs(sh)
		case "version":
			return false // the RFC's v0 schema
		}
		return s.skip()
	})
	s.ws()
	return sh, ok && haveCommon && haveJobs && s.pos == len(s.data)
}

// scanner reads JSON from data at pos.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) common(sh *lldShape) bool {
	var haveOutput, haveArgs, haveInputs bool
	ok := s.object(func(key string) bool {
		var ok bool
		switch key {
		case "linker_output":
			if haveOutput {
				return false
			}
			haveOutput = true
			sh.linkerOutput, ok = s.str()
		case "args":
			if haveArgs {
				return false
			}
			haveArgs = true
			sh.cargs, ok = s.strs()
		case "inputs":
			if haveInputs {
				return false
			}
			haveInputs = true
			sh.cinputs, ok = s.strs()
		case "codegen-tool", "modules":
			return false // the RFC's v0 schema
		default:
			return s.skip()
		}
		return ok
	})
	return ok && haveArgs
}

func (s *scanner) jobs(sh *lldShape) bool {
	return s.array(func() bool {
		var j lldJobShape
		var have [3]bool
		ok := s.object(func(key string) bool {
			var dst *[]string
			k := 0
			switch key {
			case "args":
				dst, k = &j.args, 0
			case "inputs":
				dst, k = &j.inputs, 1
			case "outputs":
				dst, k = &j.outputs, 2
			default:
				return s.skip()
			}
			if have[k] {
				return false
			}
			have[k] = true
			var ok bool
			*dst, ok = s.strs()
			return ok
		})
		sh.jobs = append(sh.jobs, j)
		return ok && have[0] && have[1] && have[2]
	})
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// eat consumes c, after any whitespace, if it is next.
func (s *scanner) eat(c byte) bool {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// object reads an object, calling member for each key with pos at its
// value, which member reads.
func (s *scanner) object(member func(key string) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		key, ok := s.str()
		if !ok || !s.eat(':') {
			return false
		}
		s.ws()
		if !member(key) {
			return false
		}
		if !s.eat(',') {
			return s.eat('}')
		}
	}
}

// array reads an array, calling elem to read each element.
func (s *scanner) array(elem func() bool) bool {
	if !s.eat('[') {
		return false
	}
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		if !s.eat(',') {
			return s.eat(']')
		}
	}
}

// strs reads an array of strings.
func (s *scanner) strs() ([]string, bool) {
	out := []string{}
	ok := s.array(func() bool {
		v, ok := s.str()
		out = append(out, v)
		return ok
	})
	return out, ok
}

// str reads a string. One of plain ASCII, all that lld writes for plain
// paths, is sliced out as it is; any other (escapes, other UTF-8 or
// invalid bytes) is decoded by encoding/json, as the general path does.
func (s *scanner) str() (string, bool) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return "", false
	}
	start, plain := s.pos, true
	for i := start + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			if plain {
				return string(s.data[start+1 : i]), true
			}
			var v string
			if json.Unmarshal(s.data[start:s.pos], &v) != nil {
				return "", false
			}
			return v, true
		case c == '\\':
			plain = false
			i++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", false // JSON forbids it unescaped
		case c >= 0x80:
			plain = false
		}
	}
	return "", false
}

// skip reads a value of any type, for a key this schema does not use (lld
// may add some), and checks that it is well formed.
func (s *scanner) skip() bool {
	s.ws()
	start, depth := s.pos, 0
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case '"':
			if _, ok := s.str(); !ok {
				return false
			}
		case '{', '[':
			depth++
			s.pos++
		case '}', ']', ',':
			if depth == 0 {
				// The end of a number, true, false or null.
				return s.pos > start && json.Valid(s.data[start:s.pos])
			}
			if c != ',' {
				depth--
			}
			s.pos++
		default:
			s.pos++
		}
		if depth == 0 && (s.data[start] == '"' || s.data[start] == '{' || s.data[start] == '[') {
			return json.Valid(s.data[start:s.pos])
		}
	}
	return false
}
