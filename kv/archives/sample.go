package archives

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
)

// sampleWords is the vocabulary of SampleEntries: words of an agent's
// coding conversation. Drawn at random, their text compresses worse than
// real prose (no phrases repeat), so ratios measured on it are a floor.
var sampleWords = strings.Fields(`the a to of and in is it that for on with this be are as you can not
we will file function test error build run go package import return value string config session
key transcript message agent tool call result reply user assistant model token index stream bucket
server client request response subject timeout retry update delete reset archive compress budget
list read write append sequence cursor watch signal notice gateway worker lane claim queue spawn
child parent announce deliver channel thread route label status done failed running ok check fix
change add remove rename move copy line lines path dir directory data json jsonl byte bytes size
limit page offset count entry entries time now later first last next previous here there should
would could must may might also only just then when where which what why how because so but if
else case switch for range loop break continue defer go chan select mutex lock context cancel`)

// SampleEntries makes n transcript entries shaped like an agent session's
// (user turns, assistant replies with text and tool calls, tool results
// with usage), deterministic for a seed: what the archive tests and
// benchmarks compress.
func SampleEntries(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	text := func(words int) string {
		var b strings.Builder
		for i := range words {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sampleWords[r.IntN(len(sampleWords))])
		}
		return b.String()
	}
	ts := int64(1_790_000_000_000)
	out := make([][]byte, n)
	for i := range n {
		ts += int64(500 + r.IntN(20_000))
		var m map[string]any
		switch i % 3 {
		case 0:
			m = map[string]any{"role": "user", "content": text(8 + r.IntN(40)), "timestamp": ts}
		case 1:
			m = map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": text(20 + r.IntN(120))},
				map[string]any{"type": "toolCall", "id": "call_" + text(1) + "_" + string(rune('a'+r.IntN(26))),
					"name":      []string{"read", "exec", "edit", "sessions_send"}[r.IntN(4)],
					"arguments": map[string]any{"path": "/work/" + text(1) + "/" + text(1) + ".go"}},
			}, "timestamp": ts, "model": "gpt-5.2", "stopReason": "toolUse",
				"usage": map[string]any{"input": 1000 + r.IntN(90_000), "output": 20 + r.IntN(2000), "cacheRead": r.IntN(80_000)}}
		default:
			m = map[string]any{"role": "toolResult", "toolName": "exec", "content": []any{
				map[string]any{"type": "text", "text": text(10 + r.IntN(200))},
			}, "isError": r.IntN(10) == 0, "timestamp": ts}
		}
		b, _ := json.Marshal(m)
		out[i] = b
	}
	return out
}

// JSONL is entries as an archive holds them: each followed by "\n".
func JSONL(entries [][]byte) []byte {
	n := len(entries)
	for _, e := range entries {
		n += len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = append(append(b, e...), '\n')
	}
	return b
}
