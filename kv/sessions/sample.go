package sessions

import "fmt"

var sampleChannels = [...]string{"telegram", "whatsapp", "discord", "slack", "signal"}

// Sample is session i of the synthetic inventory the benchmarks list (bench
// and this package's and the handlers' in-process benchmarks): 70% direct chats, 20%
// groups, 10% sub-agents spawned by a direct session, with the fields an
// OpenClaw store entry carries (ids, channel, origin, model, token counts)
// and updatedAt spread over 30 days.
func Sample(i int, now int64) *Entry {
	ch := sampleChannels[i%len(sampleChannels)]
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 31
	e := &Entry{
		AgentID:       "main",
		SessionID:     fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h), uint16(h>>32), uint16(h>>48)&0xfff, i&0xfff, i),
		UpdatedAt:     now - int64(h%(30*24*3600*1000)),
		Channel:       ch,
		LastChannel:   ch,
		Model:         "gpt-5.2",
		ModelProvider: "openai",
		InputTokens:   int64(h % 90_000),
		OutputTokens:  int64(h % 9_000),
		ContextTokens: 200_000,
	}
	e.CreatedAt = e.UpdatedAt - int64(h%(7*24*3600*1000))
	e.TotalTokens = e.InputTokens + e.OutputTokens
	switch i % 10 {
	case 7, 8:
		e.Key = fmt.Sprintf("agent:main:%s:group:g%07d", ch, i)
		e.ChatType = "group"
		e.DisplayName = fmt.Sprintf("%s group %d", ch, i)
		e.Origin = &Origin{Provider: ch, ChatType: "group"}
		e.DeliveryContext = &DeliveryContext{Channel: ch, To: fmt.Sprintf("g%07d", i)}
	case 9:
		parent := i - 9 // a direct session (i-9 ≡ 0 mod 10)
		e.Key = fmt.Sprintf("agent:main:subagent:%s", e.SessionID)
		e.SpawnedBy = fmt.Sprintf("agent:main:%s:direct:u%07d", sampleChannels[parent%len(sampleChannels)], parent)
		depth := 1
		e.SpawnDepth = &depth
		e.Label = fmt.Sprintf("research task %d", i)
		e.Channel, e.LastChannel = "", ""
	default:
		e.Key = fmt.Sprintf("agent:main:%s:direct:u%07d", ch, i)
		e.ChatType = "direct"
		e.DisplayName = fmt.Sprintf("%s user %d", ch, i)
		e.Origin = &Origin{Provider: ch, ChatType: "direct"}
		e.DeliveryContext = &DeliveryContext{Channel: ch, To: fmt.Sprintf("u%07d", i)}
	}
	return e
}
