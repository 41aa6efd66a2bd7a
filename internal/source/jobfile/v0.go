package jobfile

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/thindist/thindist/internal/action"
)

// The RFC draft schema, version 0.x.

type v0Module struct{ id, path string }

func (p *parser) parseV0(top, common map[string]json.RawMessage) (*File, error) {
	f := &File{Schema: "rfc-v0"}
	raw, ok := top["version"]
	if !ok {
		return nil, fieldErr(-1, "version", "missing: a job file with codegen-tool or modules must say its schema version")
	}
	var ver map[string]json.RawMessage
	if err := decode(raw, &ver, "version"); err != nil {
		return nil, err
	}
	var major, minor int
	for key, dst := range map[string]*int{"major": &major, "minor": &minor} {
		r, ok := ver[key]
		if !ok {
			return nil, fieldErr(-1, "version."+key, "missing")
		}
		if err := decode(r, dst, "version."+key); err != nil {
			return nil, err
		}
	}
	if major != 0 {
		return nil, fieldErr(-1, "version", "%d.%d is not supported: thindist reads the lld 21/22 schema and RFC schema 0.x; upgrade thindist", major, minor)
	}
	if raw, ok := common["linker_output"]; ok {
		if err := decode(raw, &f.LinkerOutput, "common.linker_output"); err != nil {
			return nil, err
		}
	}
	var tool string
	if raw, ok := common["codegen-tool"]; !ok {
		return nil, fieldErr(-1, "common.codegen-tool", "missing: it names the compiler")
	} else if err := decode(raw, &tool, "common.codegen-tool"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(tool) == "" {
		return nil, fieldErr(-1, "common.codegen-tool", "%s", emptyCompilerFix)
	}
	cargs, err := templatesAt(common, "args", "common.args", true)
	if err != nil {
		return nil, err
	}
	cinputs, err := stringsAt(common, "inputs", "common.inputs", false)
	if err != nil {
		return nil, err
	}
	modules, err := modulesAt(common)
	if err != nil {
		return nil, err
	}
	jobs, err := jobsAt(top)
	if err != nil {
		return nil, err
	}
	for i, job := range jobs {
		a, err := p.v0Job(i, job, tool, cargs, cinputs, modules)
		if err != nil {
			return nil, err
		}
		f.Actions = append(f.Actions, a)
	}
	return f, nil
}

// template is one RFC argument: a literal, or [prefix, "inputs"|"outputs", index].
type template struct {
	lit    string
	prefix string
	kind   action.RefKind
	index  int
}

func templatesAt(obj map[string]json.RawMessage, key, field string, required bool) ([]template, error) {
	raw, ok := obj[key]
	if !ok {
		if required {
			return nil, fieldErr(-1, field, "missing")
		}
		return nil, nil
	}
	var elems []json.RawMessage
	if err := decode(raw, &elems, field); err != nil {
		return nil, err
	}
	out := make([]template, len(elems))
	for i, e := range elems {
		f := fmt.Sprintf("%s[%d]", field, i)
		if len(e) > 0 && e[0] == '"' {
			if err := decode(e, &out[i].lit, f); err != nil {
				return nil, err
			}
			continue
		}
		var parts []json.RawMessage
		if err := decode(e, &parts, f); err != nil {
			return nil, fieldErr(-1, f, "must be a string or a [prefix, \"inputs\"|\"outputs\", index] template")
		}
		if len(parts) != 3 {
			return nil, fieldErr(-1, f, "a template needs 3 entries [prefix, \"inputs\"|\"outputs\", index], has %d", len(parts))
		}
		var which string
		if err := decode(parts[0], &out[i].prefix, f+"[0]"); err != nil {
			return nil, err
		}
		if err := decode(parts[1], &which, f+"[1]"); err != nil {
			return nil, err
		}
		if err := decode(parts[2], &out[i].index, f+"[2]"); err != nil {
			return nil, err
		}
		switch which {
		case "inputs":
			out[i].kind = action.InputRef
		case "outputs":
			out[i].kind = action.OutputRef
		default:
			return nil, fieldErr(-1, f+"[1]", "is %q; a template refers to \"inputs\" or \"outputs\"", which)
		}
		if out[i].index < 0 {
			return nil, fieldErr(-1, f+"[2]", "is negative")
		}
	}
	return out, nil
}

func modulesAt(common map[string]json.RawMessage) ([]v0Module, error) {
	raw, ok := common["modules"]
	if !ok {
		return nil, nil
	}
	var elems []json.RawMessage
	if err := decode(raw, &elems, "common.modules"); err != nil {
		return nil, err
	}
	mods := make([]v0Module, len(elems))
	for i, e := range elems {
		f := fmt.Sprintf("common.modules[%d]", i)
		if len(e) > 0 && e[0] == '"' {
			if err := decode(e, &mods[i].id, f); err != nil {
				return nil, err
			}
			mods[i].path = mods[i].id
		} else {
			var pair []string
			if err := decode(e, &pair, f); err != nil || len(pair) != 2 {
				return nil, fieldErr(-1, f, "must be a path or an [identifier, path] pair")
			}
			mods[i].id, mods[i].path = pair[0], pair[1]
		}
		if mods[i].id == "" || mods[i].path == "" {
			return nil, fieldErr(-1, f, "has an empty identifier or path")
		}
	}
	return mods, nil
}

func (p *parser) v0Job(i int, job map[string]json.RawMessage, tool string, cargs []template, cinputs []string, modules []v0Module) (*action.Action, error) {
	field := func(k string) string { return fmt.Sprintf("jobs[%d].%s", i, k) }
	raw, ok := job["inputs"]
	if !ok {
		return nil, &Error{Job: i, Field: field("inputs"), Msg: "missing"}
	}
	var elems []json.RawMessage
	if err := decode(raw, &elems, field("inputs")); err != nil {
		return nil, withJob(err, i, "")
	}
	a := &action.Action{Dir: p.dir}
	for k, e := range elems {
		f := fmt.Sprintf("jobs[%d].inputs[%d]", i, k)
		in := action.Input{Role: roleOf(k)}
		if len(e) > 0 && e[0] == '"' {
			if err := decode(e, &in.Path, f); err != nil {
				return nil, withJob(err, i, "")
			}
		} else {
			var ref int
			if err := decode(e, &ref, f); err != nil {
				return nil, &Error{Job: i, Field: f, Msg: "must be a path or an integer index into common.modules"}
			}
			if ref < 0 || ref >= len(modules) {
				return nil, &Error{Job: i, Field: f, Msg: fmt.Sprintf("refers to module %d, but common.modules has %d entries", ref, len(modules))}
			}
			in.Path = modules[ref].id
			if modules[ref].path != in.Path {
				in.Source = modules[ref].path
			}
		}
		a.Inputs = append(a.Inputs, in)
	}
	label := ""
	if len(a.Inputs) > 0 {
		label = a.Inputs[0].Path
	}
	for _, in := range cinputs {
		a.Inputs = append(a.Inputs, action.Input{Path: in, Role: action.RoleCommon})
	}
	outputs, err := stringsAt(job, "outputs", field("outputs"), true)
	if err != nil {
		return nil, withJob(err, i, label)
	}
	for _, o := range outputs {
		a.Outputs = append(a.Outputs, action.Output{Path: o})
	}
	jargs, err := templatesAt(job, "args", field("args"), false)
	if err != nil {
		return nil, withJob(err, i, label)
	}
	a.Args = append(a.Args, action.Lit(tool))
	for k, t := range append(append([]template{}, cargs...), jargs...) {
		switch t.kind {
		case action.Literal:
			a.Args = append(a.Args, p.refer(a, t.lit))
			continue
		case action.InputRef:
			if t.index >= len(elems) {
				return nil, &Error{Job: i, Label: label, Field: argField(i, k, len(cargs)),
					Msg: fmt.Sprintf("refers to inputs[%d], but the job has %d inputs", t.index, len(elems))}
			}
			a.Args = append(a.Args, action.In(t.prefix, t.index))
		case action.OutputRef:
			if t.index >= len(a.Outputs) {
				return nil, &Error{Job: i, Label: label, Field: argField(i, k, len(cargs)),
					Msg: fmt.Sprintf("refers to outputs[%d], but the job has %d outputs", t.index, len(a.Outputs))}
			}
			a.Args = append(a.Args, action.Out(t.prefix, t.index))
		}
	}
	return a, p.finish(a, i)
}

func argField(job, k, ncommon int) string {
	if k < ncommon {
		return fmt.Sprintf("common.args[%d]", k)
	}
	return fmt.Sprintf("jobs[%d].args[%d]", job, k-ncommon)
}
