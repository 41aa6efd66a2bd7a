package record

import "github.com/thindist/thindist/internal/observe/redact"

// Redacted returns a copy of run with credentials removed from everything
// that may quote a command line or a message (internal/observe/redact): by value,
// those in v, and by syntax, any credential flag's value. run is not
// changed; the copy shares the fields that need no redaction.
func (run *Run) Redacted(v redact.Values) *Run {
	out := *run
	out.Args = v.Args(run.Args)
	out.Linker = v.Args(run.Linker)
	out.Log = v.String(run.Log)
	out.Error = v.String(run.Error)
	out.Remote = v.String(run.Remote)
	if run.Commands != nil {
		out.Commands = make([][]string, len(run.Commands))
		for i, c := range run.Commands {
			out.Commands[i] = v.Args(c)
		}
	}
	if run.Actions != nil {
		out.Actions = make([]Action, len(run.Actions))
		for i, a := range run.Actions {
			a.Env = v.Args(a.Env)
			a.Error = v.String(a.Error)
			out.Actions[i] = a
		}
	}
	return &out
}
