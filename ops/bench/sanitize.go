package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sessionbus/sessionbus/rules/sanitize"
)

// sanitizeInputBytes is the size of sanitize_80k's input: 80 KiB.
const sanitizeInputBytes = 80 * 1024

// mixedText is 80 KiB of assistant-style text mixing everything the
// history sanitizer and the redactor look for: prose, Markdown code fences
// and spans (kept), reasoning tags, <relevant-memories> blocks, tool-call
// XML, downgraded [Tool Call: ...] text, model control tokens, MiniMax
// tool XML, credentials (env assignments, JSON fields, CLI flags, bearer
// headers, vendor prefixes, a PEM block), and some non-ASCII text.
func mixedText() string {
	sections := []string{
		"The deployment finished at 14:02 UTC. Three services restarted cleanly; the billing worker needed a second attempt because its health check timed out after 30 s. Latency is back to normal (p50 41 ms, p99 180 ms) and the error rate dropped below 0.1%. Café-Konfiguration geprüft, 日本語のログも確認しました ✅.\n\n",
		"<think>The user asked for a summary, not the raw logs. Mention the retry, skip the stack trace.</think>Here is the summary you asked for.\n\n",
		"```go\nfunc retry(ctx context.Context, n int, f func() error) error {\n\tfor i := 0; i < n; i++ {\n\t\tif err := f(); err == nil {\n\t\t\treturn nil\n\t\t}\n\t\t// <tool_call>this stays: it is inside a code fence</tool_call>\n\t}\n\treturn errors.New(\"gave up\")\n}\n```\n\n",
		"<relevant-memories>\n- user prefers short answers\n- staging cluster is eu-west-1\n</relevant-memories>\nI used the staging cluster in eu-west-1 as before.\n\n",
		"<tool_call>{\"name\":\"exec\",\"arguments\":{\"command\":\"kubectl rollout status deploy/billing -n prod\",\"timeout\":120}}</tool_call>\nThe rollout is complete.\n\n",
		"[Tool Call: exec (ID: call_7f3a)]\nArguments: {\"command\":\"grep -c ERROR /var/log/billing.log\"}\nTwelve errors were logged during the restart window, all of them timeouts.\n\n",
		"<|im_start|>assistant<|im_end|> The cache hit ratio is 97.4% <｜end▁of▁sentence｜> after the warm-up.\n\n",
		"<minimax:tool_call><invoke name=\"search\"><parameter name=\"q\">billing timeout</parameter></invoke></minimax:tool_call>Nothing relevant turned up in the runbooks.\n\n",
		"For the next run export OPENAI_API_KEY=sk-proj-9fK2mQ7xLp4Rt8Vz1Nb6 and DB_PASSWORD=\"hunter2-but-longer-than-18\", then call the API with curl -H \"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJiZW5jaCJ9.c2lnbmF0dXJl\" https://api.example.com/v1/jobs --token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8.\n\n",
		"The config now reads {\"apiKey\": \"AIzaSyD-4x9Qm2Lk7Pz3Vb8Nc1Rt6Yw0Es5Hu\", \"region\": \"eu-west-1\", \"refreshToken\": \"rt_8d7c6b5a4f3e2d1c0b9a\"}; the Slack bot uses xoxb-1234567890-abcdefghij and Telegram 123456789:AAHk-9xYz_Qw3Er5Ty7Ui9Op1As3Df5Gh7.\n\n",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1x9Qm2Lk7Pz3Vb8Nc1Rt6Yw0Es5HuX4c9Qm2Lk7Pz3Vb8Nc1\nRt6Yw0Es5HuX4c9Qm2Lk7Pz3Vb8Nc1Rt6Yw0Es5HuX4c9Qm2Lk7Pz3Vb8Nc1Rt6Y\n-----END RSA PRIVATE KEY-----\nRotate that key after the incident review.\n\n",
		"Inline code like `<think>not a tag here</think>` and `sk-notreallyakey123` stays as written, because it is quoted in a code span. Next steps: 1) close the incident, 2) add an alert on health-check timeouts, 3) raise the billing worker's start-up budget to 60 s.\n\n",
	}
	// A downgraded tool result runs to the next "[Tool " marker or the end
	// of the text, so it comes once, last; whole sections fill the rest and
	// plain words pad it to exactly 80 KiB (a cut section could leave an
	// unclosed tag that hides everything after it).
	const tail = "[Tool Result for ID call_7f3a]\n12\n"
	var b strings.Builder
	for i := 0; ; i++ {
		sec := sections[i%len(sections)]
		if b.Len()+len(sec)+len(tail) > sanitizeInputBytes {
			break
		}
		b.WriteString(sec)
	}
	for b.Len()+len(tail) < sanitizeInputBytes {
		b.WriteString("word "[:min(5, sanitizeInputBytes-len(tail)-b.Len())])
	}
	b.WriteString(tail)
	return b.String()
}

// sanitize_80k: VisibleText(History) then Redactor.ToolPayload over 80 KiB
// of mixed text, with the redactor the default config builds.
func runSanitize80k(ctx context.Context, e *env) (Result, error) {
	red, err := sanitize.NewRedactor(e.cfg.Logging.RedactSensitive, e.cfg.Logging.RedactPatterns)
	if err != nil {
		return Result{}, err
	}
	in := mixedText()
	probe, changed := red.ToolPayload(sanitize.VisibleText(in, sanitize.History))
	if !changed || len(probe) < len(in)/2 {
		return Result{}, fmt.Errorf("sanitizer/redactor: %d of %d bytes left, changed %v", len(probe), len(in), changed)
	}
	sink := 0
	r, err := measure(ctx, e.sz.sn, func() error {
		out, _ := red.ToolPayload(sanitize.VisibleText(in, sanitize.History))
		sink += len(out)
		return nil
	})
	if sink == 0 {
		return r, errors.New("sanitizer produced nothing")
	}
	r.Dataset = "80 KiB mixed text (tags, tool XML, code, secrets)"
	r.Sync = "n/a (no I/O)"
	r.MBPerSec = f64(round(float64(len(in))*r.OpsPerSec/1e6, 1))
	return r, err
}
