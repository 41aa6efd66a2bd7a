package reapisim

import (
	"fmt"
	"path"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thindist/thindist/internal/remote/reapi"
	"github.com/thindist/thindist/internal/testsupport/reapitest"
)

// replayGroup replays a thindist group (reapi.BuildGroup: several backend
// actions run by one shell script) from the recording of its members, as
// one worker slot running them one after the other: it takes the sum of
// their recorded times and returns their recorded outputs, a status file
// and a log per member, where the script would have put them. ok is false
// when the command is no group, the simulation records, or a member is
// not in the recording: the group then runs for real.
func (m *Simulator) replayGroup(x *reapitest.Execution, queuedAt *timestamppb.Timestamp) (*repb.ExecuteResponse, bool) {
	s, action, command := x.Server, x.Action, x.Command
	members, ok := reapi.ParseGroup(command)
	if !ok || m.sim.Record {
		return nil, false
	}
	data, ok := s.Blob(action.GetInputRootDigest())
	if !ok {
		return nil, false
	}
	var root repb.Directory
	if proto.Unmarshal(data, &root) != nil {
		return nil, false
	}
	roots := map[string]*repb.Digest{}
	for _, d := range root.GetDirectories() {
		roots[d.GetName()] = d.GetDigest()
	}
	type replayed struct {
		rec  *recordedAction
		dir  string
		slow bool
	}
	var recs []replayed
	var total time.Duration
	for _, mem := range members {
		dir := path.Join(mem.Root, mem.WorkingDirectory)
		// The member as it would have been sent alone: its own input
		// root, its command, its outputs relative to its working
		// directory.
		cmd := &repb.Command{Arguments: mem.Arguments, WorkingDirectory: mem.WorkingDirectory}
		for _, o := range command.GetOutputPaths() {
			if rel, ok := strings.CutPrefix(o, dir+"/"); ok && o != mem.Status && o != mem.Log {
				cmd.OutputPaths = append(cmd.OutputPaths, rel)
			}
		}
		d, ok := roots[mem.Root]
		if !ok {
			return nil, false
		}
		key, err := contentKey(s, &repb.Action{InputRootDigest: d, Salt: action.GetSalt()}, cmd)
		if err != nil {
			return nil, false
		}
		rec, ok := m.sim.Recording.get(key)
		if !ok {
			return nil, false
		}
		r := replayed{rec: rec, dir: dir, slow: key == m.slow}
		total += m.replayTime(rec, r.slow)
		recs = append(recs, r)
	}
	start := timestamppb.Now()
	if !sleepCtx(x.ServerContext(), total) {
		return reapitest.StoppedResponse(), true
	}
	ar := &repb.ActionResult{}
	var cpu time.Duration
	for i, r := range recs {
		for _, b := range r.rec.blobs {
			s.PutBlob(b)
		}
		for _, f := range r.rec.Result.GetOutputFiles() {
			f = proto.Clone(f).(*repb.OutputFile)
			f.Path = path.Join(r.dir, f.Path)
			ar.OutputFiles = append(ar.OutputFiles, f)
		}
		var log []byte
		if d := r.rec.Result.GetStderrDigest(); d != nil {
			log, _ = s.Blob(d)
		}
		log = append(log, r.rec.Result.GetStderrRaw()...)
		cpu += r.rec.CPU
		st := reapi.GroupStatus(int(r.rec.Result.GetExitCode()), cpu)
		ar.OutputFiles = append(ar.OutputFiles,
			&repb.OutputFile{Path: members[i].Status, Digest: s.PutBlob(st)},
			&repb.OutputFile{Path: members[i].Log, Digest: s.PutBlob(log)})
	}
	m.replayed.Add(int64(len(recs)))
	ar.ExecutionMetadata = &repb.ExecutedActionMetadata{
		Worker:                      fmt.Sprintf("reapitest-simulated-worker (%d slots), a group of %d", m.slots.size, len(recs)),
		QueuedTimestamp:             queuedAt,
		WorkerStartTimestamp:        start,
		ExecutionStartTimestamp:     start,
		ExecutionCompletedTimestamp: timestamppb.Now(),
		WorkerCompletedTimestamp:    timestamppb.Now(),
	}
	return &repb.ExecuteResponse{Result: ar, Status: reapitest.StatusOf(nil)}, true
}
