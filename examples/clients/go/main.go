// The two-step check from Go, with the standard library only (no generated
// code: the Connect protocol's JSON form over net/http).
//
//	AGENTLANE_BRIDGE=/path/to/agentlane-bridge go run . -- \
//	    --app demo_app:create_backend --project-dir ../../backend --python ../../../.venv/bin/python
//
// Step 1: Ping, GetVersion (api, protocol major 1, the backend's version), one
// call without the token refused as unauthenticated. Step 2: two runs of a
// real conversation; the client answers the agent's approval request,
// allowing once and denying once, and the tool result and final answer must
// reflect it.
//
// A client must read the Prompt stream and call Approve concurrently (here:
// a goroutine on a second connection): the run waits for the approval.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
)

const denial = "Denied by the Go client."

// connectError is the Connect protocol's error body.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *connectError) Error() string { return e.Code + ": " + e.Message }

// BridgeEvent is agentlane.bridge.v1.BridgeEvent in the proto3 JSON form
// (uint64 travels as a string).
type BridgeEvent struct {
	Seq  string `json:"seq"`
	Type string `json:"type"`
	JSON string `json:"json"`
}

type streamItem struct {
	Event       *BridgeEvent    `json:"event"`
	InvalidLine json.RawMessage `json:"invalidLine"`
}

type client struct {
	url, token string
	http       *http.Client
}

func (c *client) request(method string, body []byte, contentType string, withToken bool) (*http.Response, error) {
	req, err := http.NewRequest("POST", c.url+"/agentlane.bridge.v1."+method, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	if withToken {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.http.Do(req)
}

// unary calls a unary method with JSON and decodes the answer into out.
func (c *client) unary(method string, in, out interface{}, withToken bool) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := c.request(method, body, "application/json", withToken)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		e := &connectError{}
		if json.Unmarshal(data, e) != nil || e.Code == "" {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
		}
		return e
	}
	return json.Unmarshal(data, out)
}

// stream calls a server-streaming method and hands each item to each; the
// error is the stream's end (nil for an OK end).
func (c *client) stream(method string, in interface{}, each func(streamItem)) error {
	message, err := json.Marshal(in)
	if err != nil {
		return err
	}
	envelope := make([]byte, 5, 5+len(message))
	binary.BigEndian.PutUint32(envelope[1:], uint32(len(message)))
	resp, err := c.request(method, append(envelope, message...), "application/connect+json", true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	reader := bufio.NewReader(resp.Body)
	for {
		var head [5]byte
		if _, err := io.ReadFull(reader, head[:]); err != nil {
			return fmt.Errorf("the stream ended without its end message: %w", err)
		}
		data := make([]byte, binary.BigEndian.Uint32(head[1:]))
		if _, err := io.ReadFull(reader, data); err != nil {
			return err
		}
		if head[0]&0x02 != 0 { // EndStreamResponse
			var end struct {
				Error *connectError `json:"error"`
			}
			if err := json.Unmarshal(data, &end); err != nil {
				return err
			}
			if end.Error != nil {
				return end.Error
			}
			return nil
		}
		var item streamItem
		if err := json.Unmarshal(data, &item); err != nil {
			return err
		}
		each(item)
	}
}

type record struct {
	Type    string `json:"type"`
	Payload struct {
		Result interface{} `json:"result"`
		OK     bool        `json:"ok"`
		Event  struct {
			Record struct {
				RequestID     string `json:"request_id"`
				Status        string `json:"status"`
				FinalDecision *struct {
					Outcome string `json:"outcome"`
				} `json:"final_decision"`
			} `json:"record"`
		} `json:"event"`
	} `json:"payload"`
}

type event struct {
	Type        string      `json:"type"`
	FinalOutput interface{} `json:"final_output"`
	Event       *record     `json:"event"`
}

func converse(c *client, allowed bool) (toolResult, finalOutput interface{}, err error) {
	var answers sync.WaitGroup
	var mu sync.Mutex
	var answerErrs []error
	var decisions []string
	var terminal *event
	streamErr := c.stream("AgentService/Prompt", map[string]string{"text": "Please save a note: remember milk."}, func(item streamItem) {
		if item.Event == nil {
			return
		}
		var e event
		if json.Unmarshal([]byte(item.Event.JSON), &e) != nil {
			return
		}
		if e.Event != nil && e.Event.Type == "tool_approval" && e.Event.Payload.Event.Record.Status == "pending" {
			request := map[string]interface{}{"id": e.Event.Payload.Event.Record.RequestID, "allowed": allowed}
			if !allowed {
				request["reason"] = denial
			}
			answers.Add(1)
			go func() { // the stream keeps being read meanwhile
				defer answers.Done()
				var answer struct {
					Resolved BridgeEvent `json:"resolved"`
				}
				err := c.unary("AgentService/Approve", request, &answer, true)
				var resolved event
				if err == nil {
					err = json.Unmarshal([]byte(answer.Resolved.JSON), &resolved)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					answerErrs = append(answerErrs, err)
				} else if d := resolved.Event.Payload.Event.Record.FinalDecision; d != nil {
					decisions = append(decisions, d.Outcome)
				}
			}()
		}
		if e.Event != nil && e.Event.Type == "tool_end" {
			toolResult = e.Event.Payload.Result
		}
		if e.Type == "run_complete" || e.Type == "run_cancelled" || e.Type == "error" {
			terminal = &e
		}
	})
	answers.Wait()
	if streamErr != nil {
		return nil, nil, streamErr
	}
	if len(answerErrs) > 0 {
		return nil, nil, answerErrs[0]
	}
	if len(decisions) == 0 {
		return nil, nil, errors.New("the agent asked for no approval")
	}
	want := map[bool]string{true: "allow", false: "deny"}[allowed]
	for _, d := range decisions {
		if d != want {
			return nil, nil, fmt.Errorf("resolved as %s, not %s", d, want)
		}
	}
	if terminal == nil || terminal.Type != "run_complete" {
		return nil, nil, fmt.Errorf("the run did not complete: %+v", terminal)
	}
	result, _ := toolResult.(string)
	if !allowed && !strings.Contains(result, denial) {
		return nil, nil, fmt.Errorf("the tool result does not carry the denial: %v", toolResult)
	}
	if answer, ok := terminal.FinalOutput.(string); ok && result != "" && !strings.Contains(answer, result) {
		return nil, nil, fmt.Errorf("the final answer %q does not reflect the tool result %q", answer, result)
	}
	return toolResult, terminal.FinalOutput, nil
}

func check(args []string) error {
	binaryPath := os.Getenv("AGENTLANE_BRIDGE")
	if binaryPath == "" {
		binaryPath = "agentlane-bridge"
	}
	bridge := exec.Command(binaryPath, args...)
	bridge.Stderr = os.Stderr
	stdin, err := bridge.StdinPipe() // kept open: closing it stops the bridge
	if err != nil {
		return err
	}
	stdout, err := bridge.StdoutPipe()
	if err != nil {
		return err
	}
	if err := bridge.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		bridge.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no discovery line: %w", err)
	}
	body := strings.TrimPrefix(strings.TrimSpace(line), "agentlane-bridge ready ")
	if body == strings.TrimSpace(line) {
		return fmt.Errorf("agentlane-bridge did not start: %s", line)
	}
	var info struct {
		Schema    int    `json:"schema"`
		API       string `json:"api"`
		URL       string `json:"url"`
		TokenFile string `json:"tokenFile"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return err
	}
	if info.Schema != 1 || info.API != "agentlane.bridge.v1" {
		return fmt.Errorf("unknown discovery line: %s", line)
	}
	token, err := os.ReadFile(info.TokenFile)
	if err != nil {
		return err
	}
	c := &client{url: info.URL, token: strings.TrimSpace(string(token)), http: &http.Client{}}

	// Step 1: the control path.
	var pong struct {
		Message string `json:"message"`
	}
	if err := c.unary("BridgeControlService/Ping", struct{}{}, &pong, true); err != nil || pong.Message != "pong" {
		return fmt.Errorf("Ping: %v %q", err, pong.Message)
	}
	var version struct {
		API             string `json:"api"`
		ProtocolVersion string `json:"protocolVersion"`
		ReadyJSON       string `json:"readyJson"`
	}
	if err := c.unary("BridgeControlService/GetVersion", struct{}{}, &version, true); err != nil {
		return fmt.Errorf("GetVersion: %w", err)
	}
	if version.API != "agentlane.bridge.v1" || strings.Split(version.ProtocolVersion, ".")[0] != "1" {
		return fmt.Errorf("GetVersion: %+v", version)
	}
	var ready struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(version.ReadyJSON), &ready); err != nil || ready.Version == "" {
		return fmt.Errorf("GetVersion.readyJson: %v", err)
	}
	var refused *connectError
	if err := c.unary("BridgeControlService/Ping", struct{}{}, &pong, false); !errors.As(err, &refused) || refused.Code != "unauthenticated" {
		return fmt.Errorf("a call without the token was not refused as unauthenticated: %v", err)
	}
	fmt.Printf("step 1: ok (pong; api %s, protocol %s, agentlane %s; no token -> unauthenticated)\n", version.API, version.ProtocolVersion, ready.Version)

	// Step 2: the reverse direction, allowed once and denied once.
	for _, allowed := range []bool{true, false} {
		result, final, err := converse(c, allowed)
		if err != nil {
			return fmt.Errorf("step 2 (allowed=%v): %w", allowed, err)
		}
		fmt.Printf("step 2: ok (allowed=%v: tool result %q; final answer %q)\n", allowed, result, final)
	}
	var stopped map[string]interface{}
	return c.unary("BridgeControlService/Shutdown", struct{}{}, &stopped, true)
}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if err := check(args); err != nil {
		fmt.Printf("check: FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("check: passed")
}
