package correctness

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/luaheader"
)

// TestReplyCodesMatchTheScripts holds the reply codes correctness reads
// against those the scripts' headers list, so that a code changed in a
// header or in a constant alone fails it. internal/lease's test of the same
// name holds the engine's, and leaves these scripts to this one.
func TestReplyCodesMatchTheScripts(t *testing.T) {
	done := []int64{electionDone, electionUnmoved}
	want := map[string][]int64{
		"election_announce": done,
		"election_proclaim": done,
		"election_resign":   done,
		"election_leader":   {int64(free), int64(waiting), int64(leading)},
		"register_write":    {registerStored},
	}
	for script, codes := range want {
		t.Run(script, func(t *testing.T) {
			got, err := luaheader.Codes(filepath.Join("..", "scripts", script+".lua"))
			if err != nil {
				t.Fatal(err)
			}
			if want := luaheader.Distinct(codes); !slices.Equal(got, want) {
				t.Errorf("reply codes: the header lists %v, correctness has %v", got, want)
			}
		})
	}
}
