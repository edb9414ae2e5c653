package agentlane

// The error details this package reads. Connect sends each as its binary
// proto in unpadded base64; the two messages here are small enough to read
// by hand (no generated code, no dependency).

import (
	"encoding/base64"
	"errors"
	"strings"
)

// ConfigureFailure is the detail of a Configure the backend answered with
// `ok: false`: its error code (invalid, rejected, unsupported, internal)
// and its `config` event, which holds the current document.
type ConfigureFailure struct {
	Code  string
	Event *Event
}

// ConfigureFailureOf returns the ConfigureFailure detail of a Configure
// error, if it has one.
func ConfigureFailureOf(err error) (*ConfigureFailure, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return nil, false
	}
	for _, detail := range e.Details {
		if detail.Type != "agentlane.bridge.v1.ConfigureFailure" {
			continue
		}
		data, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(detail.Value, "="))
		if err != nil {
			return nil, false
		}
		failure := &ConfigureFailure{}
		ok := readFields(data, func(field int, varint uint64, bytes []byte) bool {
			switch field {
			case 1:
				failure.Code = string(bytes)
			case 2:
				failure.Event = &Event{}
				return readFields(bytes, func(field int, varint uint64, bytes []byte) bool {
					switch field {
					case 1:
						failure.Event.Seq = varint
					case 2:
						failure.Event.Type = string(bytes)
					case 3:
						failure.Event.JSON = string(bytes)
					}
					return true
				})
			}
			return true
		})
		return failure, ok
	}
	return nil, false
}

// readFields walks a proto message's varint and length-delimited fields
// (the only wire types these messages use; any other one is a failure).
func readFields(data []byte, each func(field int, varint uint64, bytes []byte) bool) bool {
	for len(data) > 0 {
		key, n := uvarint(data)
		if n == 0 {
			return false
		}
		data = data[n:]
		field := int(key >> 3)
		switch key & 7 {
		case 0:
			value, n := uvarint(data)
			if n == 0 || !each(field, value, nil) {
				return false
			}
			data = data[n:]
		case 2:
			size, n := uvarint(data)
			if n == 0 || size > uint64(len(data)-n) {
				return false
			}
			if !each(field, 0, data[n:n+int(size)]) {
				return false
			}
			data = data[n+int(size):]
		default:
			return false
		}
	}
	return true
}

// uvarint decodes a varint; n is 0 for a truncated or overlong one.
func uvarint(data []byte) (value uint64, n int) {
	for i := 0; i < len(data) && i < 10; i++ {
		value |= uint64(data[i]&0x7f) << (7 * i)
		if data[i] < 0x80 {
			return value, i + 1
		}
	}
	return 0, 0
}
