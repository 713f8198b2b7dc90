package bus

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping. encoding/json writes <, >
// and & as six bytes each, so text full of them (code, markup) grows up to
// sixfold; messages that carry whole transcript entries must fit the entry
// limit and the server's max_payload, and nothing here is embedded in HTML.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
