package testprog

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ReferenceDistributorEnv makes a test binary whose TestMain calls
// ServeReferenceDistributor act as LLVM's reference DTLTO distributor
// (llvm/utils/dtlto/local.py): give the binary to lld as
// -fthinlto-distributor with this variable set to a directory, which
// receives a copy of each job's object under the base name of its module.
const ReferenceDistributorEnv = "THINDIST_TEST_REFERENCE_DISTRIBUTOR"

// ServeReferenceDistributor returns at once unless ReferenceDistributorEnv
// is set; then it runs every job of the job file lld names last on the
// command line as local.py does (`common.args + job.args`, one after the
// other, nothing else) and exits: 0 if every job succeeded, 1 if not.
func ServeReferenceDistributor() {
	keep := os.Getenv(ReferenceDistributorEnv)
	if keep == "" {
		return
	}
	if err := referenceDistribute(os.Args[len(os.Args)-1], keep); err != nil {
		fmt.Fprintln(os.Stderr, "reference distributor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func referenceDistribute(jobFile, keep string) error {
	data, err := os.ReadFile(jobFile)
	if err != nil {
		return err
	}
	var jf struct {
		Common struct {
			Args []string `json:"args"`
		} `json:"common"`
		Jobs []struct {
			Args    []string `json:"args"`
			Inputs  []string `json:"inputs"`
			Outputs []string `json:"outputs"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &jf); err != nil {
		return fmt.Errorf("%s: %v", jobFile, err)
	}
	for _, j := range jf.Jobs {
		argv := append(append([]string{}, jf.Common.Args...), j.Args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%q: %v", argv, err)
		}
		obj, err := os.ReadFile(j.Outputs[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(keep, filepath.Base(j.Inputs[0])), obj, 0o644); err != nil {
			return err
		}
	}
	return nil
}
