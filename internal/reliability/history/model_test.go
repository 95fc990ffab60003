package history_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerInput is one operation on a fenced register: a write of value with
// token, or a read.
type registerInput struct {
	write bool
	token uint64
	value string
}

// registerOutput is what the operation returned: whether a write was
// accepted, or the value and token a read found.
type registerOutput struct {
	accepted bool
	token    uint64
	value    string
}

// registerState is the fenced register: the highest token accepted and the
// value written with it.
type registerState struct {
	token uint64
	value string
}

// registerModel is the sequential specification of correctness.Register: a
// write is accepted exactly when its token is at least the highest accepted
// before, and then replaces the value; a rejected write changes nothing; a
// read returns the state.
var registerModel = porcupine.Model{
	Init: func() any { return registerState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(registerState), input.(registerInput), output.(registerOutput)
		switch {
		case !in.write:
			return out.token == s.token && out.value == s.value, s
		case in.token >= s.token:
			return out.accepted, registerState{token: in.token, value: in.value}
		default:
			return !out.accepted, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(registerInput), output.(registerOutput)
		if !in.write {
			return fmt.Sprintf("read() -> %q@%d", out.value, out.token)
		}
		verdict := "rejected"
		if out.accepted {
			verdict = "accepted"
		}
		return fmt.Sprintf("write(%d, %q) -> %s", in.token, in.value, verdict)
	},
	DescribeState: func(state any) string {
		s := state.(registerState)
		return fmt.Sprintf("%q@%d", s.value, s.token)
	},
}

// tokenModel is the specification of the tokens of successive grants of one
// lock, a fetch-and-increment counter: each grant's token is greater than
// every token granted before it. An operation's output is its token; the
// state is the highest token granted.
var tokenModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, _, output any) (bool, any) {
		token := output.(uint64)
		return token > state.(uint64), token
	},
	DescribeOperation: func(_, output any) string { return fmt.Sprintf("acquire() -> %d", output) },
	DescribeState:     func(state any) string { return fmt.Sprint(state) },
}

// checkTimeout bounds one porcupine check. The histories here are mostly
// serialised by the lock and check in milliseconds; a check that runs out is
// reported, not passed.
const checkTimeout = time.Minute

// linearize checks ops against model. When the history is not linearizable
// (or the check ran out of time) it saves porcupine's visualisation in the
// test's artifact directory (kept with go test -artifacts) and returns its
// path.
func linearize(t *testing.T, name string, model porcupine.Model, ops []porcupine.Operation) (porcupine.CheckResult, string) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	if res == porcupine.Ok {
		return res, ""
	}
	path := filepath.Join(t.ArtifactDir(), name+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("saving the visualisation of the %s history: %v", name, err)
		return res, ""
	}
	return res, path
}

// requireLinearizable fails the test when ops is not linearizable under model.
func requireLinearizable(t *testing.T, name string, model porcupine.Model, ops []porcupine.Operation) {
	t.Helper()
	if res, path := linearize(t, name, model, ops); res != porcupine.Ok {
		t.Errorf("%s history of %d operations: got %v, want %v; visualisation: %s (run with -artifacts to keep it)",
			name, len(ops), res, porcupine.Ok, path)
	}
}

// staleAccepted returns the accepted writes whose token is lower than that of
// an accepted write that returned before they were called: the writes a fence
// must never accept. It says in plain code what porcupine's verdict implies,
// and names the writes.
func staleAccepted(ops []porcupine.Operation) []string {
	var accepted []porcupine.Operation
	for _, op := range ops {
		if in := op.Input.(registerInput); in.write && op.Output.(registerOutput).accepted {
			accepted = append(accepted, op)
		}
	}
	byCall := slices.Clone(accepted)
	slices.SortFunc(byCall, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	byReturn := slices.Clone(accepted)
	slices.SortFunc(byReturn, func(a, b porcupine.Operation) int { return int(a.Return - b.Return) })
	var stale []string
	var highest registerInput
	next := 0
	for _, op := range byCall {
		// Closed intervals, as porcupine reads them: a write that returned at
		// the instant op was called may still be concurrent with it.
		for ; next < len(byReturn) && byReturn[next].Return < op.Call; next++ {
			if in := byReturn[next].Input.(registerInput); in.token > highest.token {
				highest = in
			}
		}
		if in := op.Input.(registerInput); in.token < highest.token {
			stale = append(stale, fmt.Sprintf("write(%d, %q) accepted after write(%d, %q)", in.token, in.value, highest.token, highest.value))
		}
	}
	return stale
}

// TestModelsRejectBrokenHistories shows that the checker catches what the
// history tests look for: a stale write accepted, an acknowledged write lost,
// a token going back. Without it a model that accepts everything would pass
// every history.
func TestModelsRejectBrokenHistories(t *testing.T) {
	w := func(client int, call, ret int64, token uint64, value string, accepted bool) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret,
			Input: registerInput{write: true, token: token, value: value}, Output: registerOutput{accepted: accepted}}
	}
	r := func(client int, call, ret int64, token uint64, value string) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret,
			Input: registerInput{}, Output: registerOutput{token: token, value: value}}
	}
	grant := func(client int, call, ret int64, token uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Output: token}
	}
	tests := []struct {
		name  string
		model porcupine.Model
		ops   []porcupine.Operation
		want  porcupine.CheckResult
		stale int
	}{
		{"register/ok", registerModel, []porcupine.Operation{
			w(0, 0, 10, 33, "A", true), w(1, 20, 30, 34, "B", true), w(0, 40, 50, 33, "A2", false), r(1, 60, 70, 34, "B"),
		}, porcupine.Ok, 0},
		{"register/concurrent writes may land in either order", registerModel, []porcupine.Operation{
			w(0, 0, 30, 34, "B", true), w(1, 10, 20, 33, "A", true), r(1, 40, 50, 34, "B"),
		}, porcupine.Ok, 0},
		{"register/stale write accepted", registerModel, []porcupine.Operation{
			w(0, 0, 10, 34, "B", true), w(1, 20, 30, 33, "A", true),
		}, porcupine.Illegal, 1},
		{"register/acknowledged write lost", registerModel, []porcupine.Operation{
			w(0, 0, 10, 33, "A", true), w(1, 20, 30, 34, "B", true), r(0, 40, 50, 33, "A"),
		}, porcupine.Illegal, 0},
		{"register/newer write rejected", registerModel, []porcupine.Operation{
			w(0, 0, 10, 33, "A", true), w(1, 20, 30, 34, "B", false),
		}, porcupine.Illegal, 0},
		{"tokens/increasing", tokenModel, []porcupine.Operation{
			grant(0, 0, 10, 5), grant(1, 5, 30, 7), grant(2, 6, 20, 6), grant(0, 40, 50, 8),
		}, porcupine.Ok, 0},
		{"tokens/going back", tokenModel, []porcupine.Operation{
			grant(0, 0, 10, 5), grant(1, 20, 30, 4),
		}, porcupine.Illegal, 0},
		{"tokens/repeated", tokenModel, []porcupine.Operation{
			grant(0, 0, 10, 5), grant(1, 20, 30, 5),
		}, porcupine.Illegal, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, path := linearize(t, "broken", tt.model, tt.ops)
			if res != tt.want {
				t.Fatalf("got %v, want %v", res, tt.want)
			}
			if res != porcupine.Ok {
				if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
					t.Errorf("visualisation %q: got %v, want a non-empty file", path, err)
				}
			}
			if registerInputs(tt.ops) {
				if got := staleAccepted(tt.ops); len(got) != tt.stale {
					t.Errorf("staleAccepted: got %q, want %d writes", got, tt.stale)
				}
			}
		})
	}
}

func registerInputs(ops []porcupine.Operation) bool {
	_, ok := ops[0].Input.(registerInput)
	return ok
}
