package serve

import (
	"fmt"
	"reflect"
	"testing"
)

// bodySeeds are request bodies, well-formed and not, that the two ways
// of decoding must answer alike.
var bodySeeds = []string{
	`{}`, `{"ttl_ms":5000,"wait_ms":0,"owner":"w"}`, ` { "owner" : "a,b:{c}[d]\"e" } `,
	`{"ttl_ms":5000,"ttl_ms":20}`, `{"TTL_MS":5}`, `{"ttl":5}`, `{"owner":"x","Owner":"y"}`,
	`{"ttl\u005fms":7}`, `{"ttl\u005fms":7,"ttl_ms":8}`, `{"owner":{"ttl_ms":1}}`, `{"owner":["ttl","x"]}`,
	`{"owner":"\\","wait_ms":1}`, `{"ttl_ms":"5s"}`, `{"ttl_ms":1.5}`, `{"ttl_ms":null}`,
	`[]`, `"x"`, `null`, `5`, `{} {}`, `{"ttl_ms":`, `{"ttl_ms":5`, `{"a"}`, `{,}`, `{"owner":"x",}`,
	`{"permits":2,"owner":"o","ttl_ms":100,"wait_ms":-1}`, `{"value":"v"}`, "{\"owner\":\"\xff\"}", "{\"\xc2\":0}",
}

// TestTopKeysAgreesWithTheTokenWalk: the one-scan check of a body's keys
// answers every seed as the token walk does: the same error, or the same
// decoded body.
func TestTopKeysAgreesWithTheTokenWalk(t *testing.T) {
	for _, seed := range bodySeeds {
		compareDecoders(t, []byte(seed))
	}
}

// FuzzStrictUnmarshal: the same, for any body.
func FuzzStrictUnmarshal(f *testing.F) {
	for _, seed := range bodySeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(compareDecoders)
}

func compareDecoders(t *testing.T, data []byte) {
	var fast, slow semaphoreBody
	errFast := strictUnmarshal(data, &fast)
	errSlow := strictDecode(data, &slow, jsonNames(reflect.TypeFor[semaphoreBody]()))
	if fmt.Sprint(errFast) != fmt.Sprint(errSlow) || !reflect.DeepEqual(fast, slow) {
		t.Errorf("body %q: one scan gives %v, %+v; the token walk gives %v, %+v", data, errFast, fast, errSlow, slow)
	}
}

// TestDecodeAllocations: checking and decoding a usual acquire body
// allocates little (8 allocations: the decoder, the values); the token
// walk then a second decode took 59.
func TestDecodeAllocations(t *testing.T) {
	data := []byte(`{"ttl_ms":10000,"wait_ms":0,"owner":"worker-7"}`)
	allocs := testing.AllocsPerRun(100, func() {
		var b lockBody
		if err := strictUnmarshal(data, &b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 12 {
		t.Errorf("strictUnmarshal of an acquire body: %.0f allocations, want at most 12", allocs)
	}
}
