package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file speaks the Chrome DevTools Protocol over the WebSocket of
// websocket.go: commands are {"id", "method", "params", "sessionId"} and
// their answers carry the same id; events carry a method and, when they
// come from a page, the sessionId of the tab attached to it (flat session
// mode). One reader goroutine routes answers to their callers and events
// to their tab's channel.

type cdpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data"`
}

func (e *cdpError) Error() string {
	if e.Data != "" {
		return fmt.Sprintf("cdp %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("cdp %d: %s", e.Code, e.Message)
}

type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *cdpError       `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

// event is one CDP event for a tab.
type event struct {
	Method string
	Params json.RawMessage
}

type cdp struct {
	ws *wsConn

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan cdpMessage // guarded by mu
	sessions map[string]chan event     // guarded by mu
	err      error                     // guarded by mu: why the reader stopped
}

func newCDP(ws *wsConn) *cdp {
	c := &cdp{ws: ws, pending: map[int64]chan cdpMessage{}, sessions: map[string]chan event{}}
	go c.readLoop()
	return c
}

func (c *cdp) readLoop() {
	for {
		data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.err = err
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			for _, ch := range c.sessions {
				close(ch)
			}
			c.sessions = map[string]chan event{}
			c.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else if ch, ok := c.sessions[m.SessionID]; ok && m.Method != "" {
			select {
			case ch <- event{m.Method, m.Params}:
			default: // a tab that stopped listening loses events, never blocks the reader
			}
		}
		c.mu.Unlock()
	}
}

// call sends method with params (to a tab when session is not "") and
// decodes the answer into result, which may be nil.
func (c *cdp) call(ctx context.Context, session, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if params == nil {
		raw = []byte("{}")
	}
	ch := make(chan cdpMessage, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: the browser connection is gone: %w", method, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: raw, SessionID: session})
	if err := c.ws.WriteText(msg); err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: the browser connection closed", method)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	}
}

// attach opens a new tab and returns its session, whose events arrive on
// the returned channel.
func (c *cdp) attach(ctx context.Context) (string, chan event, error) {
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
		return "", nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		return "", nil, err
	}
	ch := make(chan event, 4096)
	c.mu.Lock()
	c.sessions[attached.SessionID] = ch
	c.mu.Unlock()
	for _, domain := range []string{"Page", "Runtime", "Log", "Network"} {
		if err := c.call(ctx, attached.SessionID, domain+".enable", nil, nil); err != nil {
			return "", nil, err
		}
	}
	return attached.SessionID, ch, nil
}

// startChromium starts a headless browser with a fresh profile and returns
// its DevTools WebSocket URL, read from the DevToolsActivePort file the
// browser writes once it listens (on a port it picked itself).
func startChromium(ctx context.Context, exe, profile string, log *os.File) (wsURL string, wait func() error, err error) {
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir=" + profile, "--remote-debugging-port=0", "about:blank",
	}
	cmd := execGroup(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("starting %s: %w (install it with: apt-get install -y chromium)", exe, err)
		}
		return "", nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	wait = func() error { return <-exited }
	portFile := filepath.Join(profile, "DevToolsActivePort")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(portFile); err == nil {
			if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) == 2 {
				if _, err := strconv.Atoi(lines[0]); err == nil {
					return "ws://127.0.0.1:" + lines[0] + lines[1], wait, nil
				}
			}
		}
		select {
		case err := <-exited:
			return "", nil, fmt.Errorf("%s exited before it listened: %v (its output is in %s)", exe, err, log.Name())
		case <-ctx.Done():
			return "", nil, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", nil, errors.New("chromium did not write DevToolsActivePort within 30 s")
		}
	}
}
