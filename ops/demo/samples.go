package demo

// sample is one session the demo imports, with its transcript as JSONL.
type sample struct {
	key, label, spawnedBy string
	lines                 []string
}

// The main transcript deliberately holds what sessions_history must filter:
// reasoning tags, tool-call XML, a tool result and a planted API key.
var samples = []sample{
	{key: "agent:main:main", label: "main", lines: []string{
		`{"type":"session","version":3,"id":"demo"}`,
		`{"type":"message","message":{"role":"user","content":"Plan the release notes for v2. My deploy key is OPENAI_API_KEY=sk-demo1234567890abcdefghijklmnop"}}`,
		`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"<thinking>The user pasted a key; never repeat it.</thinking>I'll split the work: research and writing.<tool_call>{\"name\":\"sessions_spawn\",\"arguments\":{\"task\":\"collect merged PRs\"}}</tool_call>"}]}}`,
		`{"type":"message","message":{"role":"toolResult","toolName":"sessions_spawn","content":[{"type":"text","text":"{\"status\":\"accepted\"}"}]}}`,
		`{"type":"message","message":{"role":"assistant","content":"Spawned two helpers; I'll merge their results."}}`,
	}},
	{key: "agent:main:subagent:6f1c2a9e-0b7d-4c3e-9a51-3d2f8e7b1a01", label: "research", spawnedBy: "agent:main:main", lines: []string{
		`{"role":"user","content":"[Subagent Task]: collect merged PRs since v1"}`,
		`{"role":"assistant","content":"Found 42 merged PRs; 5 are user-facing."}`,
	}},
	{key: "agent:main:subagent:0a9e4b7c-5d21-4f08-8c3b-7e6a1f2d9c02", label: "writer", spawnedBy: "agent:main:main", lines: []string{
		`{"role":"user","content":"[Subagent Task]: draft the notes"}`,
		`{"role":"assistant","content":"Draft ready: 5 highlights, 12 fixes."}`,
	}},
	{key: "agent:main:discord:group:release-team", label: "release-team", lines: []string{
		`{"role":"user","content":"When does v2 ship?"}`,
	}},
	{key: "agent:main:cron:nightly", label: "nightly", lines: []string{
		`{"role":"user","content":"nightly report"}`,
		`{"role":"assistant","content":"All green."}`,
	}},
	{key: "agent:ops:main", label: "ops", lines: []string{
		`{"role":"user","content":"rotate the staging certs"}`,
	}},
}
