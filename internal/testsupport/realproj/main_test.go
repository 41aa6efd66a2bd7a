package realproj

import (
	"os"
	"testing"

	"github.com/thindist/thindist/internal/testsupport/testprog"
)

func TestMain(m *testing.M) {
	// Run by lld as the reference DTLTO distributor (refdist_test.go)?
	testprog.ServeReferenceDistributor()
	os.Exit(m.Run())
}
