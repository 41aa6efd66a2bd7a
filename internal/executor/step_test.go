package executor

import "testing"

// TestStepNames: each step kind prints the name the trace has always
// given it (the step's span in a --trace file; tools and e2e tests read
// them), and an unknown kind says so rather than passing for one.
func TestStepNames(t *testing.T) {
	for k, want := range map[StepKind]string{
		StepUploadingInputs:        "uploading inputs",
		StepRemoteExecution:        "remote execution",
		StepQueued:                 "queued",
		StepExecuting:              "executing",
		StepDownloadingOutputs:     "downloading outputs",
		0:                          "StepKind(0)",
		StepDownloadingOutputs + 1: "StepKind(6)",
	} {
		if got := k.String(); got != want {
			t.Errorf("StepKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
