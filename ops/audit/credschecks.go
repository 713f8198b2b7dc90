package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/sessionbus/sessionbus/bus"
	"github.com/sessionbus/sessionbus/bus/auth"
)

// staleCreds: a credentials file whose NATS user may publish or subscribe
// to subjects its role no longer grants. Permissions live in the user JWT,
// so a file minted by an older version keeps what that version gave (an ops
// file with the JetStream API, which can make the server write into any
// stream) until it is replaced; serve rewrites the data dir's role files at
// each start, but files minted for people with `sessionbus creds` stay.
func staleCreds(t *Target) []Issue {
	prefix := bus.DefaultPrefix
	if t.Config != nil && t.Config.Bus.Prefix != "" {
		prefix = t.Config.Bus.Prefix
	}
	names := bus.NewNames(prefix)
	var out []Issue
	for _, p := range secretPaths(t) {
		if !strings.HasSuffix(p, ".creds") {
			continue
		}
		uc, role, err := auth.UserOf(p)
		if err != nil || uc == nil || role == "" {
			continue
		}
		want := auth.Permissions(role, names, auth.InboxPrefix(uc.Subject))
		for _, tag := range uc.Tags {
			if ch, ok := strings.CutPrefix(tag, "channel:"); ok {
				want = auth.ChannelAdapterPermissions(names, auth.InboxPrefix(uc.Subject), ch)
			}
		}
		extra := beyond(uc.Permissions.Pub.Allow, want.Pub.Allow)
		extra = append(extra, beyond(uc.Permissions.Sub.Allow, want.Sub.Allow)...)
		if len(extra) == 0 {
			continue
		}
		out = append(out, Issue{
			Detail: fmt.Sprintf("%s (role %s, user %s) may use %s, which its role no longer grants: it was minted by an older version.", p, role, uc.Subject, strings.Join(extra, ", ")),
			Fix:    fmt.Sprintf("mint a new file (sessionbus creds --out FILE %s), hand it out, and revoke the old user %s", role, uc.Subject),
		})
	}
	return out
}

// beyond lists the subjects of have that want does not hold.
func beyond(have, want jwt.StringList) []string {
	var out []string
	for _, s := range have {
		if !slices.Contains(want, s) {
			out = append(out, s)
		}
	}
	return out
}
