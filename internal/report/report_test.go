package report

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/thindist/thindist/internal/action"
	"github.com/thindist/thindist/internal/executor"
)

func TestSummaryLine(t *testing.T) {
	acts := make([]*action.Action, 6)
	for i := range acts {
		acts[i] = &action.Action{ID: fmt.Sprintf("m%d.o", i)}
	}
	type fin struct {
		res *executor.Result
		err error
	}
	for _, c := range []struct {
		name string
		runs []fin // what the first len(runs) actions ended with
		want string
	}{
		{"all done", []fin{
			{&executor.Result{Where: executor.Local}, nil},
			{&executor.Result{Where: executor.LocalCache}, nil},
			{&executor.Result{Where: executor.RemoteCache}, nil},
			{&executor.Result{Where: executor.Remote}, nil},
			{&executor.Result{Where: executor.Local}, nil},
			{&executor.Result{Where: executor.Local}, nil},
		}, `^thindist: 6 jobs, 0 failed, 2 cached, 1 remote, 3 local in \d+m?s; slowest m\d\.o \(`},
		{"a failure stops the run", []fin{
			{&executor.Result{Where: executor.Local}, nil},
			{&executor.Result{ExitCode: 1}, errors.New("m1.o: exit status 1")},
			{&executor.Result{Where: executor.Local}, nil},
		}, `^thindist: 6 jobs, 1 failed, 0 cached, 0 remote, 2 local, 3 not started in `},
		{"an interrupt is not a failure", []fin{
			{&executor.Result{Where: executor.LocalCache}, nil},
			{nil, fmt.Errorf("m1.o: %w", context.Canceled)},
			{nil, context.Canceled},
		}, `^thindist: 6 jobs, 0 failed, 1 cached, 0 remote, 0 local, 2 stopped, 3 not started in `},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSummary()
			s.Planned(len(acts))
			for i, f := range c.runs {
				s.Started(acts[i], 0)
				s.Finished(acts[i], 0, f.res, f.err)
			}
			if got := s.Line(); !regexp.MustCompile(c.want).MatchString(got) {
				t.Errorf("summary %q, want it to match %q", got, c.want)
			}
		})
	}
}
