package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// OutputsValue converts an activity's stored outputs (a JSON object such as
// {"result": ..., "stdout": "...", "exit_code": 0}) into the cty object that
// activity.NAME evaluates to. Values inside may be any JSON; null or empty
// input gives an empty object.
func OutputsValue(raw json.RawMessage) (cty.Value, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return cty.EmptyObjectVal, nil
	}
	if trimmed[0] != '{' {
		return cty.NilVal, fmt.Errorf("decode outputs: want a JSON object, got %.20q", trimmed)
	}
	ty, err := ctyjson.ImpliedType(trimmed)
	if err != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", err)
	}
	v, err := ctyjson.Unmarshal(trimmed, ty)
	if err != nil {
		return cty.NilVal, fmt.Errorf("decode outputs: %w", err)
	}
	return v, nil
}

func ctyMarshal(v cty.Value) ([]byte, error) {
	return ctyjson.Marshal(v, v.Type())
}
