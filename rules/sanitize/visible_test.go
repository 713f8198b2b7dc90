package sanitize

import (
	"encoding/json"
	"strings"
	"testing"
)

type visibleCase struct {
	name, in string
	want     string
}

func runVisible(t *testing.T, p Profile, cases []visibleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := VisibleText(tc.in, p); got != tc.want {
				t.Fatalf("VisibleText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func lines(parts ...string) string { return strings.Join(parts, "\n") }

// Cases ported from the reference's stripAssistantInternalScaffolding tests
// (internal-scaffolding profile), limited to that profile's rules.
func TestVisibleInternalScaffolding(t *testing.T) {
	fencedMemories := lines("```xml", "<relevant-memories>", "sample", "</relevant-memories>", "```", "", "Visible text")
	runVisible(t, InternalScaffolding, []visibleCase{
		{"strips reasoning tags", lines("<thinking>", "secret", "</thinking>", "Visible"), "Visible"},
		{"strips relevant-memories blocks", lines("<relevant-memories>",
			"The following memories may be relevant to this conversation:", "- Internal memory note",
			"</relevant-memories>", "", "User-visible answer"), "User-visible answer"},
		{"relevant_memories variant", lines("<relevant_memories>", "Internal memory note", "</relevant_memories>", "Visible"), "Visible"},
		{"unclosed memories hide the rest", lines("Hello", "<relevant-memories>", "internal-only"), "Hello\n"},
		{"trims leading whitespace after scaffolding", lines("<thinking>", "secret", "</thinking>", "   ",
			"<relevant-memories>", "internal note", "</relevant-memories>", "  Visible"), "Visible"},
		{"preserve mode keeps unclosed reasoning", lines("Before", "<thinking>", "secret",
			"<relevant-memories>", "internal note", "</relevant-memories>", "After"), "Before\n\nsecret\n\nAfter"},
		{"memories in fenced code kept", fencedMemories, fencedMemories},
		{"memories in inline code kept", "Use `<relevant-memories>example</relevant-memories>` literally.",
			"Use `<relevant-memories>example</relevant-memories>` literally."},
		{"keeps downgraded tool text", lines("[Tool Call: read (ID: toolu_1)]", `Arguments: {"path":"/tmp/x"}`, "Visible answer"),
			lines("[Tool Call: read (ID: toolu_1)]", `Arguments: {"path":"/tmp/x"}`, "Visible answer")},
		{"keeps minimax XML", `a <invoke name="x">y</invoke></minimax:tool_call> b`, `a <invoke name="x">y</invoke></minimax:tool_call> b`},
		{"trims start only", "  text  ", "text  "},
		{"special tokens after reasoning", lines("<thinking>", "internal reasoning", "</thinking>", "<|assistant|>Visible response"), "Visible response"},
	})
}

func TestVisibleToolCallXML(t *testing.T) {
	stringifiedPayload, _ := json.Marshal(map[string]string{"html": `"</tool_call>`, "tail": "</tool_call> still hidden"})
	fenced := lines("```xml", `<tool_call> {"name": "find"} </tool_call>`, "```", "", "Visible text")
	cases := []visibleCase{
		{"closed tool_call", "Let me check.\n\n<tool_call> {\"name\": \"read\", \"arguments\": {\"file_path\": \"test.md\"}} </tool_call> after", "Let me check.\n\n after"},
		{"closed function_calls", `Checking now. <function_calls>{"name": "exec", "args": {"cmd": "ls"}}</function_calls> Done.`, "Checking now.  Done."},
		{"closed function_call", `a <function_call>{"name":"x"}</function_call> b`, "a  b"},
		{"closed tool_calls", `a <tool_calls>[{"name":"x"}]</tool_calls> b`, "a  b"},
		{"closed tool_result", "Prefix\n<tool_result> {\"output\": \"file contents\"} </tool_result>\nSuffix", "Prefix\n\nSuffix"},
		{"dangling tool_result hides to end", "Result:\n<tool_result>\n{\"output\": \"data\"}\n", "Result:\n"},
		{"tool_result closed by </tool_call>", "Prefix\n<tool_result> {\"output\": \"data\"} </tool_call>\nSuffix", "Prefix\n\nSuffix"},
		{"</tool_result> does not close tool_call", "Prefix\n<tool_call>{\"name\":\"x\"}</tool_result>LEAK</tool_call>\nSuffix", "Prefix\n\nSuffix"},
		{"dangling tool_call", "Let me run.\n<tool_call>\n{\"name\": \"find\", \"arguments\": {}}\n", "Let me run.\n"},
		{"nested function XML", "prefix\n<tool_call><function=read><parameter=path>/home/user</parameter></function></tool_call>\nsuffix", "prefix\n\nsuffix"},
		{"whitespace before nested XML", "prefix\n<tool_call>\n<function=search><parameter=query>test</parameter></function>\n</tool_call>\nsuffix", "prefix\n\nsuffix"},
		{"invoke child", `a <tool_call><invoke name="x">q</invoke></tool_call> b`, "a  b"},
		{"arguments child", "a <tool_call>\n  <arguments>q</arguments></tool_call> b", "a  b"},
		{"dangling nested XML", "prefix\n<tool_call><function=read><parameter=path>/home", "prefix\n"},
		{"XML payload is not quote-balanced", "<tool_call><parameter name=\"m\">don't</parameter></tool_call> shown", " shown"},
		{"XML child only for tool_call", `p <function_calls><invoke name="find">secret</invoke></function_calls> s`, `p <function_calls><invoke name="find">secret</invoke></function_calls> s`},
		{"truncated opening hides rest", "prefix\n<tool_call\n{\"name\":\"find\",\"arguments\":{}}", "prefix\n"},
		{"truncated opening with attributes", "prefix\n<tool_call name=\"find\"\n{\"arguments\":{}}", "prefix\n"},
		{"attributes then payload", `a <tool_call id="1" kind=x>{"n":1}</tool_call> b`, "a  b"},
		// findTagCloseIndex meets '<' before any '>', so the opening is
		// truncated; "1{" starts the payload and the rest is hidden.
		{"truncated opening with unquoted attribute", `a <tool_call id=1{"n":1}</tool_call> b`, "a "},
		{"unquoted attribute value running into payload", `a <tool_call> k=v{"n":1}</tool_call> b`, "a  b"},
		{"truncated array payload", "prefix\n<function_calls id=\"x\"\n[{\"name\":\"find\"}]", "prefix\n"},
		{"lone mention kept", "Use <tool_call> to invoke tools.", "Use <tool_call> to invoke tools."},
		{"mention with matching close kept", "prefix <tool_call><arg>secret</arg></tool_call> suffix", "prefix <tool_call><arg>secret</arg></tool_call> suffix"},
		{"XML-ish explanation kept", "Use <tool_call><arg> literally.", "Use <tool_call><arg> literally."},
		{"self-closing removed", "prefix <tool_call/> suffix", "prefix  suffix"},
		{"self-closing with attributes removed", `prefix <function_calls name="x"/> suffix`, "prefix  suffix"},
		{"lone closing removed", "prefix </tool_call> suffix", "prefix  suffix"},
		{"lone closing function_calls removed", "prefix </function_calls> suffix", "prefix  suffix"},
		{"case-insensitive names", `a <TOOL_CALL>{"x":1}</Tool_Call> b`, "a  b"},
		{"name must end at a boundary", `prefix <tool_call-example>{"name":"read"}</tool_call-example> suffix`, `prefix <tool_call-example>{"name":"read"}</tool_call-example> suffix`},
		{"other names untouched", `a <tool>{"x":1}</tool> b`, `a <tool>{"x":1}</tool> b`},
		{"truncated mention kept", "Use <tool_call to invoke tools.", "Use <tool_call to invoke tools."},
		{"truncated mention with attributes kept", `Use <tool_call name="find" to invoke tools.`, `Use <tool_call name="find" to invoke tools.`},
		{"later payload after truncated mention", "Use <tool_call to invoke tools.\n<tool_call>{\"name\":\"find\"}</tool_call>", "Use <tool_call to invoke tools.\n"},
		{"later payload after truncated closing mention", "Use </tool_call to explain tags.\n<tool_call>{\"name\":\"find\"}</tool_call>", "Use </tool_call to explain tags.\n"},
		{"truncated XML opening kept", "prefix\n<function_calls\n<invoke name=\"find\">", "prefix\n<function_calls\n<invoke name=\"find\">"},
		{"inline code kept", "Use `<tool_call>` to invoke tools.", "Use `<tool_call>` to invoke tools."},
		{"fenced code kept", fenced, fenced},
		{"close inside JSON string ignored", lines("prefix", "<tool_call>", `{"name":"x","arguments":{"html":"<div></tool_call><span>leak</span>"}}`, "</tool_call>", "suffix"), "prefix\n\nsuffix"},
		{"close inside single-quoted string ignored", lines("prefix", "<tool_call>", "{'html':'</tool_call> leak','tail':'still hidden'}", "</tool_call>", "suffix"), "prefix\n\nsuffix"},
		{"escaped quotes tracked", lines("prefix", "<tool_call>", string(stringifiedPayload), "</tool_call>", "suffix"), "prefix\n\nsuffix"},
		{"mismatched close does not end block", lines("prefix", "<tool_call>", `{"name":"read",`, "</function_calls>", "still-hidden", "</tool_call>", "suffix"), "prefix\n\nsuffix"},
		{"block closes even if payload opens a fence", lines("prefix", "<tool_call>", `{"name":"read",`, "```xml", "<note>hi</note>", "</tool_call>", "suffix"), "prefix\n\nsuffix"},
		{"history whitespace around block", `Hi <tool_result>{"output":"hidden"}</tool_result>there`, "Hi there"},
		{"fail closed on truncated parameters", `<tool_call><parameter name="token">secret</parameter>`, ""},
	}
	runVisible(t, History, cases)
}

func TestVisibleSpecialTokens(t *testing.T) {
	code := lines("<|assistant|>Here is the code:", "", "```python", "def foo():", "    if True:", "        return 42", "```")
	fenced := lines("Here are the model tokens:", "", "```", "<|assistant|>Hello<|end|>", "```", "", "As you can see above.")
	runVisible(t, Delivery, []visibleCase{
		{"isolated tokens", "<|assistant|>Here is the answer<|end|>", "Here is the answer"},
		{"full-width pipes", "<｜begin▁of▁sentence｜>Hello world", "Hello world"},
		{"mixed pipes", "x <|a｜> y", "x  y"},
		{"between words inserts one space", "hello<|im_end|>world", "hello world"},
		{"next to whitespace inserts nothing", "Start <|tool_call_result_begin|>middle<|tool_call_result_end|> end", "Start middle end"},
		{"neighbours come from the original text", "(**bold<|assistant|>**). First<|user|><|assistant|>second `x<|assistant|>y`", "(**bold **). First  second `x<|assistant|>y`"},
		{"html untouched", "Use <div>hello</div> in HTML", "Use <div>hello</div> in HTML"},
		{"code indentation kept", code, strings.TrimPrefix(code, "<|assistant|>")},
		{"tokens in fenced code kept", fenced, fenced},
		{"tokens in inline code kept", "The token `<|assistant|>` marks the start.", "The token `<|assistant|>` marks the start."},
		{"token ending inside inline code kept", "Before <|token `code|>` after", "Before <|token `code|>` after"},
		{"token ending inside fence kept", lines("Before <|token", "```js", "const x = 1;|>", "```", "after"), lines("Before <|token", "```js", "const x = 1;|>", "```", "after")},
		{"pipe not followed by > is no token", "a <|b|c|> d", "a <|b|c|> d"},
	})
	if got := stripModelSpecialTokens("prefix <|assistant|>"); got != "prefix " {
		t.Fatalf("got %q", got)
	}
	if got := stripModelSpecialTokens("<|assistant|>short"); got != "short" {
		t.Fatalf("got %q", got)
	}
}

func TestVisibleRelevantMemories(t *testing.T) {
	runVisible(t, History, []visibleCase{
		{"block removed", lines("<relevant-memories>", "internal note", "</relevant-memories>", "Visible answer"), "\nVisible answer"},
		{"attributes and spacing", "a< relevant_memories id=\"1\" >x</ RELEVANT-MEMORIES >b", "ab"},
		{"stray close dropped", "a</relevant-memories>b", "ab"},
		{"unclosed hides rest", "a<relevant-memories>b", "a"},
		{"name must end at a boundary", "a<relevant-memoriesx>b", "a<relevant-memoriesx>b"},
		{"tag in code ignored", "`<relevant-memories>` kept", "`<relevant-memories>` kept"},
	})
	runVisible(t, Delivery, []visibleCase{
		{"delivery trims", lines("<relevant-memories>", "internal note", "</relevant-memories>", "Visible answer"), "Visible answer"},
	})
}

func TestVisibleMinimax(t *testing.T) {
	runVisible(t, History, []visibleCase{
		{"invoke and markers removed", lines("Before", `<minimax:tool_call><invoke name="exec">payload</invoke></minimax:tool_call>`, "After"), "Before\n\nAfter"},
		{"only when minimax:tool_call is mentioned", `a <invoke name="x">y</invoke> b`, `a <invoke name="x">y</invoke> b`},
		{"case-insensitive", `a <INVOKE>y</Invoke><MINIMAX:TOOL_CALL> b`, "a  b"},
		{"unclosed invoke kept", "a <invoke x>y </minimax:tool_call>", "a <invoke x>y "},
		{"multiline non-greedy", "<invoke>1\n</invoke>k<invoke>2</invoke></minimax:tool_call>", "k"},
	})
}

func TestVisibleDowngradedToolText(t *testing.T) {
	runVisible(t, History, []visibleCase{
		{"call with JSON arguments", lines("[Tool Call: read (ID: toolu_1)]", `Arguments: {"path":"/tmp/x"}`), ""},
		{"call with arguments on the same line", `Before [Tool Call: x] Arguments: {"a":[1,{"b":"}"}]} after`, "Before  after"},
		{"call with quoted arguments", "[Tool Call: x]\nArguments: \"a \\\" b\"\nVisible", "Visible"},
		{"call with line arguments", "[Tool Call: x]\narguments: ls -la\nVisible", "Visible"},
		{"call without arguments", "Intro\n[Tool Call: x]\nVisible", "Intro\nVisible"},
		{"unbalanced arguments kept", "[Tool Call: x]\nArguments: {\"a\": 1\nVisible", "{\"a\": 1\nVisible"},
		{"result block stops before next [Tool marker", "A[Tool Result for ID 1]\nout\n[Tool note] B", "A\n[Tool note] B"},
		// Tool Call markers are stripped first, so the result block then runs
		// to the end of the text.
		{"result block after stripped call runs to end", lines("Intro", "[Tool Result for ID t1]", "output", "", "[Tool Call: y]", "Visible"), "Intro"},
		{"result block to end", lines("[Tool Result for ID abc]", "stdout: hello"), ""},
		{"result block keeps newlines before next marker", "A[Tool Result for ID 1]\nout\n\n[Tool Result for ID 2]x\n\nB", "A"},
		{"historical context marker", "[Historical context: earlier run]\nVisible answer", "Visible answer"},
		{"trims when triggered", "  [Historical context: x]  Visible  ", "Visible"},
		{"case-insensitive", "[tool call: x]\nARGUMENTS: {}\nok", "ok"},
		{"no marker no trim", "  plain  ", "  plain  "},
		{"marker in code is still stripped", "```\n[Tool Result for ID 1]\nx\n```\nafter", "```"},
	})
}

func TestVisibleReasoning(t *testing.T) {
	runVisible(t, Delivery, []visibleCase{
		{"think block", "<think>secret</think>Answer", "Answer"},
		{"thinking and thought", "a<thinking>x</thinking>b<thought>y</thought>c", "abc"},
		{"antthinking", "a<antthinking>x</antthinking>b", "ab"},
		{"antml prefix", "a<thinking>x</thinking>b", "ab"},
		{"case and spacing", "a< THINK foo=1 >x</ think >b", "ab"},
		{"mid-answer closed", "Visible prefix <think>private reasoning</think> visible suffix", "Visible prefix  visible suffix"},
		{"strict drops unclosed", "Visible prefix <think>private reasoning tail", "Visible prefix"},
		{"orphan close keeps text before", "private chain of thought </think> Visible answer", "private chain of thought  Visible answer"},
		{"final tags removed content kept", "<final>Answer</final>", "Answer"},
		{"final with thinking", "<think>plan</think><final>  Answer  </final>", "Answer"},
		{"thinker is not a tag", "a<thinker>b", "a<thinker>b"},
		{"tags in code kept", "Use `<think>` tags", "Use `<think>` tags"},
		{"final in code kept", "`<final>`x", "`<final>`x"},
		{"fenced thinking kept", "```\n<think>x</think>\n```", "```\n<think>x</think>\n```"},
	})
	runVisible(t, History, []visibleCase{
		{"no trim in history", "<think>secret</think>\n Answer \n", "\n Answer \n"},
		{"orphan close", "private chain of thought </think> Visible answer", "private chain of thought  Visible answer"},
	})
	runVisible(t, InternalScaffolding, []visibleCase{
		{"preserve keeps unclosed", "Before <think>tail", "Before tail"},
	})
}

func TestVisibleProfiles(t *testing.T) {
	in := lines(`<invoke name="read">payload</invoke></minimax:tool_call>`, `<tool_result>{"output":"hidden"}</tool_result>`,
		"[Tool Call: read (ID: toolu_1)]", `Arguments: {"path":"/tmp/x"}`, "<think>secret</think>", "Visible answer")
	if got := VisibleText(in, Delivery); got != "Visible answer" {
		t.Fatalf("delivery: %q", got)
	}
	if got := VisibleText(in, History); got != "\nVisible answer" {
		t.Fatalf("history: %q", got)
	}
	want := lines(`<invoke name="read">payload</invoke></minimax:tool_call>`, "", "[Tool Call: read (ID: toolu_1)]", `Arguments: {"path":"/tmp/x"}`, "", "Visible answer")
	if got := VisibleText(in, InternalScaffolding); got != want {
		t.Fatalf("internal: %q", got)
	}
	if got := VisibleText("  x  ", Profile(99)); got != "x" {
		t.Fatalf("unknown profile should behave like delivery: %q", got)
	}
	if VisibleText("", Delivery) != "" {
		t.Fatal("empty")
	}
	if got := VisibleText("\u00a0\u2028x\ufeff", Delivery); got != "x" {
		t.Fatalf("JavaScript trim set: %q", got)
	}
}
