// Package jobfile reads the JSON job files a linker hands to a DTLTO
// distributor and turns each job into an action.Action.
//
// Two schemas are accepted:
//   - the one lld 21 and 22 write (common.linker_output, common.args with the
//     compiler first, common.inputs, jobs[].args/inputs/outputs);
//   - the versioned draft of the DTLTO RFC ("version" 0.x): templated
//     arguments such as ["-fthinlto-index=", "inputs", 1], common.codegen-tool,
//     and common.modules, a table that job inputs refer to by integer and that
//     maps a module's identifier to the file holding it (["lib.a(m.o at 88)",
//     "m.1234.o"]).
//
// Unknown keys are ignored, as lld's documentation asks of distributors, so a
// newer lld adding fields keeps working. Everything the distributor relies on
// is checked, and an error names the job and the field.
package jobfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// File is a parsed job file.
type File struct {
	// LinkerOutput is the linker's -o, when the file names it.
	LinkerOutput string
	// Schema is "lld" or "rfc-v0".
	Schema  string
	Actions []*action.Action
}

// Error is a problem with the job file's content.
type Error struct {
	File  string // the job file
	Job   int    // index into "jobs", or -1 for the common part
	Label string // the job's module, when known
	Field string // e.g. `jobs[3].inputs[1]`
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "%s: ", e.File)
	}
	if e.Job >= 0 {
		fmt.Fprintf(&b, "job %d", e.Job)
		if e.Label != "" {
			fmt.Fprintf(&b, " (%s)", e.Label)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "%s: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and parses the job file at path. Relative paths in it are
// relative to dir, the directory the linker ran the distributor in.
func Load(path, dir string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the job file: %w", err)
	}
	f, err := Parse(data, dir)
	var je *Error
	if errors.As(err, &je) {
		je.File = path
	}
	return f, err
}

// Parse parses a job file's content. dir must be absolute.
func Parse(data []byte, dir string) (*File, error) {
	p := &parser{dir: dir}
	// lld's files, whole and well formed, in one pass (scan.go); any other
	// file, or any problem, takes the general path, which accepts exactly
	// the same files with the same result and names what is wrong.
	if sh, ok := scanLLD(data); ok {
		if f, err := p.buildLLD(sh); err == nil {
			if err := checkOutputs(f.Actions); err == nil {
				return f, nil
			}
		}
	}
	return p.parse(data)
}

// parse is Parse's general path: every schema, every error.
func (p *parser) parse(data []byte) (*File, error) {
	var top map[string]json.RawMessage
	if err := decode(data, &top, ""); err != nil {
		return nil, err
	}
	var common map[string]json.RawMessage
	raw, ok := top["common"]
	if !ok {
		return nil, fieldErr(-1, "common", "missing: a job file must have a \"common\" object")
	}
	if err := decode(raw, &common, "common"); err != nil {
		return nil, err
	}
	_, hasVersion := top["version"]
	_, hasTool := common["codegen-tool"]
	_, hasModules := common["modules"]
	var f *File
	var err error
	if hasVersion || hasTool || hasModules {
		f, err = p.parseV0(top, common)
	} else {
		f, err = p.parseLLD(top, common)
	}
	if err != nil {
		return nil, err
	}
	return f, checkOutputs(f.Actions)
}

// checkOutputs rejects jobs that would write the same file, or overwrite
// one of their own inputs: each output is staged and renamed into place, so
// the last job would silently win and lld would link one object twice.
func checkOutputs(actions []*action.Action) error {
	owner := make(map[string]int, len(actions))
	for i, a := range actions {
		for k, o := range a.Outputs {
			p := a.Abs(o.Path)
			field := func() string { return fmt.Sprintf("jobs[%d].outputs[%d]", i, k) }
			base := filepath.Base(p)
			for _, in := range a.Inputs {
				if same(a, in.Path, p, base) || in.Source != "" && same(a, in.Source, p, base) {
					return &Error{Job: i, Label: a.ID, Field: field(), Msg: fmt.Sprintf("%q is also an input of the job", o.Path)}
				}
			}
			if j, ok := owner[p]; ok {
				msg := fmt.Sprintf("%q is also an output of job %d", o.Path, j)
				if j == i {
					msg = fmt.Sprintf("%q is listed twice", o.Path)
				}
				return &Error{Job: i, Label: a.ID, Field: field(), Msg: msg}
			}
			owner[p] = i
		}
	}
	return nil
}

// same reports whether name, relative to a's directory or absolute, is the
// file at abs, whose base name is base. Only a name with that base can be,
// and most are not: they cost no absolute path (a 5,000-module program's
// main module alone imports every other module). A name whose last
// element is "." or ".." is resolved in full.
func same(a *action.Action, name, abs, base string) bool {
	if b := filepath.Base(name); b != base && b != "." && b != ".." {
		return false
	}
	return a.Abs(name) == abs
}

type parser struct {
	dir string
	// strs interns the strings that recur from job to job (a module's
	// path in the jobs that import it, an argument's prefix): the actions
	// live for the whole run, and a 10,000-job file's copies of them were
	// a tenth of thindist's heap.
	strs map[string]string
}

// intern returns s, or an equal string interned before.
func (p *parser) intern(s string) string {
	if s == "" {
		return "" // not a slice of a longer string, which it would keep
	}
	if v, ok := p.strs[s]; ok {
		return v
	}
	if p.strs == nil {
		p.strs = map[string]string{}
	}
	p.strs[s] = s
	return s
}

func fieldErr(job int, field, format string, args ...any) *Error {
	return &Error{Job: job, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// decode unmarshals raw into v and turns a type mismatch into an *Error that
// names the field.
func decode(raw json.RawMessage, v any, field string) error {
	// json.Unmarshal first: a Decoder allocates and fills a buffer of its
	// own, and a 10,000-job file makes over 100,000 of these calls. What
	// Unmarshal accepts the Decoder accepts too, with the same value; on
	// failure the Decoder below decides, as it always did.
	if json.Unmarshal(raw, v) == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	err := dec.Decode(v)
	where := field
	if where == "" {
		where = "(top level)"
	}
	if err == nil {
		// Decode reads one value: anything after it (a second object, the
		// rest of a file written twice) would otherwise pass unnoticed.
		if _, terr := dec.Token(); terr != io.EOF {
			return fieldErr(-1, where, "malformed JSON: unexpected data after the value at byte %d", dec.InputOffset())
		}
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := field
		if te.Field != "" {
			f = joinField(field, te.Field)
		}
		return fieldErr(-1, f, "has a JSON %s where %s is expected", te.Value, typeName(v))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fieldErr(-1, where, "malformed JSON at byte %d: %v", se.Offset, err)
	}
	return fieldErr(-1, where, "malformed JSON: %v", err)
}

func joinField(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func typeName(v any) string {
	switch v.(type) {
	case *map[string]json.RawMessage:
		return "an object"
	case *[]json.RawMessage, *[]string:
		return "an array"
	case *string:
		return "a string"
	case *int, *int64:
		return "an integer"
	}
	return fmt.Sprintf("%T", v)
}

// strings reads an array of strings at field; absent is nil.
func stringsAt(obj map[string]json.RawMessage, key, field string, required bool) ([]string, error) {
	raw, ok := obj[key]
	if !ok {
		if required {
			return nil, fieldErr(-1, field, "missing")
		}
		return nil, nil
	}
	// The common case, an array of strings, in one step; element by
	// element only to name the element that is wrong.
	var all []string
	if json.Unmarshal(raw, &all) == nil && all != nil {
		return all, nil
	}
	var elems []json.RawMessage
	if err := decode(raw, &elems, field); err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		if err := decode(e, &out[i], fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// jobsAt reads the "jobs" array.
func jobsAt(top map[string]json.RawMessage) ([]map[string]json.RawMessage, error) {
	var jobs []map[string]json.RawMessage
	err := eachJob(top, func(i int, job map[string]json.RawMessage) error {
		jobs = append(jobs, job)
		return nil
	})
	return jobs, err
}

// eachJob calls f with each element of the "jobs" array in turn, decoding
// one at a time so that a large file never holds every job's decoded object
// at once.
func eachJob(top map[string]json.RawMessage, f func(i int, job map[string]json.RawMessage) error) error {
	raw, ok := top["jobs"]
	if !ok {
		return fieldErr(-1, "jobs", "missing: a job file must have a \"jobs\" array")
	}
	var elems []json.RawMessage
	if err := decode(raw, &elems, "jobs"); err != nil {
		return err
	}
	delete(top, "jobs") // its content now lives in elems
	for i, e := range elems {
		var job map[string]json.RawMessage
		if err := decode(e, &job, fmt.Sprintf("jobs[%d]", i)); err != nil {
			return withJob(err, i, "")
		}
		elems[i] = nil
		if err := f(i, job); err != nil {
			return err
		}
	}
	return nil
}

func withJob(err error, job int, label string) error {
	var je *Error
	if errors.As(err, &je) {
		je.Job, je.Label = job, label
	}
	return err
}

const emptyCompilerFix = "the compiler is empty: ld.lld leaves it empty without --thinlto-remote-compiler. " +
	"Link through clang (-fuse-ld=lld -fthinlto-distributor=thindist, which passes its own path), " +
	"or add --thinlto-remote-compiler=<path to clang> to the ld.lld command"

func (p *parser) parseLLD(top, common map[string]json.RawMessage) (*File, error) {
	var sh lldShape
	if raw, ok := common["linker_output"]; ok {
		if err := decode(raw, &sh.linkerOutput, "common.linker_output"); err != nil {
			return nil, err
		}
	}
	var err error
	if sh.cargs, err = stringsAt(common, "args", "common.args", true); err != nil {
		return nil, err
	}
	f, err := p.lldFile(&sh)
	if err != nil {
		return nil, err
	}
	if sh.cinputs, err = stringsAt(common, "inputs", "common.inputs", false); err != nil {
		return nil, err
	}
	err = eachJob(top, func(i int, job map[string]json.RawMessage) error {
		var j lldJobShape
		if err := lldJobFields(i, job, &j); err != nil {
			return err
		}
		a, err := p.lldJob(i, &j, &sh)
		if err != nil {
			return err
		}
		f.Actions = append(f.Actions, a)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// lldShape is what an lld job file holds, decoded.
type lldShape struct {
	linkerOutput   string
	cargs, cinputs []string
	jobs           []lldJobShape
}

type lldJobShape struct {
	args, inputs, outputs []string
}

// buildLLD turns a decoded lld job file into actions.
func (p *parser) buildLLD(sh *lldShape) (*File, error) {
	f, err := p.lldFile(sh)
	if err != nil {
		return nil, err
	}
	f.Actions = make([]*action.Action, 0, len(sh.jobs))
	for i := range sh.jobs {
		a, err := p.lldJob(i, &sh.jobs[i], sh)
		if err != nil {
			return nil, err
		}
		f.Actions = append(f.Actions, a)
	}
	return f, nil
}

// lldFile checks the common part.
func (p *parser) lldFile(sh *lldShape) (*File, error) {
	if len(sh.cargs) == 0 {
		return nil, fieldErr(-1, "common.args", "is empty: its first entry must be the compiler")
	}
	if strings.TrimSpace(sh.cargs[0]) == "" {
		return nil, fieldErr(-1, "common.args[0]", "%s", emptyCompilerFix)
	}
	return &File{Schema: "lld", LinkerOutput: sh.linkerOutput, Actions: []*action.Action{}}, nil
}

// lldJobFields decodes job i's fields into j.
func lldJobFields(i int, job map[string]json.RawMessage, j *lldJobShape) error {
	field := func(k string) string { return fmt.Sprintf("jobs[%d].%s", i, k) }
	var err error
	if j.inputs, err = stringsAt(job, "inputs", field("inputs"), true); err != nil {
		return withJob(err, i, "")
	}
	label := ""
	if len(j.inputs) > 0 {
		label = j.inputs[0]
	}
	if j.args, err = stringsAt(job, "args", field("args"), true); err != nil {
		return withJob(err, i, label)
	}
	if j.outputs, err = stringsAt(job, "outputs", field("outputs"), true); err != nil {
		return withJob(err, i, label)
	}
	return nil
}

func (p *parser) lldJob(i int, j *lldJobShape, sh *lldShape) (*action.Action, error) {
	a := &action.Action{Dir: p.dir,
		Inputs:  make([]action.Input, 0, len(j.inputs)+len(sh.cinputs)),
		Outputs: make([]action.Output, 0, len(j.outputs)),
		Args:    make([]action.Arg, 0, len(sh.cargs)+len(j.args)),
	}
	for k, in := range j.inputs {
		if k != 1 { // the index shard is the job's own
			in = p.intern(in)
		}
		a.Inputs = append(a.Inputs, action.Input{Path: in, Role: roleOf(k)})
	}
	for _, in := range sh.cinputs {
		a.Inputs = append(a.Inputs, action.Input{Path: in, Role: action.RoleCommon})
	}
	for _, o := range j.outputs {
		a.Outputs = append(a.Outputs, action.Output{Path: o})
	}
	a.Args = append(a.Args, action.Lit(sh.cargs[0]))
	for _, s := range sh.cargs[1:] {
		a.Args = append(a.Args, p.refer(a, s))
	}
	for _, s := range j.args {
		a.Args = append(a.Args, p.refer(a, s))
	}
	return a, p.finish(a, i)
}

func roleOf(k int) action.Role {
	switch k {
	case 0:
		return action.RoleModule
	case 1:
		return action.RoleIndex
	}
	return action.RoleImport
}

// refer turns a literal argument that names one of the action's outputs or
// inputs (whole, or after "=" as in -fthinlto-index=X) into a reference, so
// executors can place that file elsewhere and the command still finds it.
// What the argument keeps (a literal, a reference's prefix) is interned.
func (p *parser) refer(a *action.Action, s string) action.Arg {
	for _, cut := range []int{0, strings.IndexByte(s, '=') + 1} {
		if cut < 0 || (cut == 0 && s == "") {
			continue
		}
		prefix, rest := s[:cut], s[cut:]
		if rest == "" {
			continue
		}
		for k, o := range a.Outputs {
			if o.Path == rest {
				return action.Out(p.intern(prefix), k)
			}
		}
		for k, in := range a.Inputs {
			if in.Path == rest {
				return action.In(p.intern(prefix), k)
			}
		}
	}
	return action.Lit(p.intern(s))
}

// finish checks the reserved entries and that every output is named by an
// argument (else the compiler would write it where thindist cannot stage it).
func (p *parser) finish(a *action.Action, i int) error {
	field := func(k string) string { return fmt.Sprintf("jobs[%d].%s", i, k) }
	switch {
	case len(a.Inputs) == 0 || a.Inputs[0].Role != action.RoleModule:
		return &Error{Job: i, Field: field("inputs"), Msg: "is empty: inputs[0] must be the bitcode module and inputs[1] its index shard"}
	case len(a.Inputs) < 2 || a.Inputs[1].Role != action.RoleIndex:
		return &Error{Job: i, Label: a.Inputs[0].Path, Field: field("inputs"), Msg: "has 1 entry: inputs[1] must be the module's index shard"}
	case len(a.Outputs) == 0:
		return &Error{Job: i, Label: a.Inputs[0].Path, Field: field("outputs"), Msg: "is empty: outputs[0] must be the native object file"}
	}
	a.ID = a.Inputs[0].Path
	for k, in := range a.Inputs {
		if in.Path == "" {
			return &Error{Job: i, Label: a.ID, Field: fmt.Sprintf("jobs[%d].inputs[%d]", i, k), Msg: "is an empty path"}
		}
	}
	used := make([]bool, len(a.Outputs))
	for _, arg := range a.Args {
		if arg.Kind == action.OutputRef {
			used[arg.Index] = true
		}
	}
	for k, o := range a.Outputs {
		if o.Path == "" {
			return &Error{Job: i, Label: a.ID, Field: fmt.Sprintf("jobs[%d].outputs[%d]", i, k), Msg: "is an empty path"}
		}
		if !used[k] {
			return &Error{Job: i, Label: a.ID, Field: fmt.Sprintf("jobs[%d].outputs[%d]", i, k),
				Msg: fmt.Sprintf("%q is not named by any argument of the job, so the compiler's output cannot be directed", o.Path)}
		}
	}
	if err := a.Validate(); err != nil {
		return &Error{Job: i, Label: a.ID, Msg: err.Error()}
	}
	return nil
}
