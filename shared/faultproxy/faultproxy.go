// Package faultproxy is a TCP proxy for fault tests: it forwards bytes
// between clients and one upstream server (Redis, PostgreSQL) and, when
// told, lets a command through and loses its reply, stalls every
// connection, cuts them all, or refuses them for a while, so that tests
// meet the failures real networks and servers produce.
package faultproxy

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards connections to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	armed   int  // commands whose reply is to be lost
	stalled bool // a partition: bytes both ways are dropped, connections stay open
	refused bool // the server is down: every connection is closed as it comes
	conns   map[*pair]struct{}
	closed  bool
	wg      sync.WaitGroup
}

type pair struct {
	client, server net.Conn
	doomed         bool // a command went up; its reply is lost and the pair cut
}

// Start listens on loopback and forwards to upstream until the test ends.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseNextReply makes the proxy forward the next command any client sends,
// wait for the server's reply, drop it and cut that connection: the command
// ran, the client never heard.
func (p *Proxy) LoseNextReply() {
	p.mu.Lock()
	p.armed++
	p.mu.Unlock()
}

// Stall starts a partition that a client cannot see: connections stay
// open, and every byte either way is dropped, so a command sent meanwhile
// gets no reply until the client's own timeout.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// Refuse cuts every connection and closes each new one as it comes, as a
// server that went down: every command fails at once, until Heal.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.refused = true
	p.mu.Unlock()
	p.CutAll()
}

// Heal ends a Stall or a Refuse. The connections a Stall held have lost
// bytes midstream, so they are cut: clients reconnect.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.stalled, p.refused = false, false
	p.mu.Unlock()
	p.CutAll()
}

// CutAll closes every open connection, both sides.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
}

// Close stops accepting and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refused := p.refused
		p.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.up(pr)
		go p.down(pr)
	}
}

// up copies client to server, marking the pair doomed when the proxy is
// armed.
func (p *Proxy) up(pr *pair) {
	defer p.wg.Done()
	defer p.drop(pr)
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if p.armed > 0 && !pr.doomed {
				p.armed--
				pr.doomed = true
			}
			stalled := p.stalled
			p.mu.Unlock()
			if stalled {
				continue
			}
			if _, werr := pr.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// down copies server to client, unless the pair is doomed: then the reply
// is read, dropped, and both sides cut.
func (p *Proxy) down(pr *pair) {
	defer p.wg.Done()
	defer p.drop(pr)
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			doomed, stalled := pr.doomed, p.stalled
			p.mu.Unlock()
			if doomed {
				return // the reply is lost with the connection
			}
			if stalled {
				continue
			}
			if _, werr := pr.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) drop(pr *pair) {
	pr.client.Close()
	pr.server.Close()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}
