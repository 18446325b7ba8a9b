package faultnet_test

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/logbook/logbook/lab/faultnet"
)

// A proxy in front of a server: the client is given the proxy's address,
// and the test cuts and heals the link.
func Example() {
	server, _ := net.Listen("tcp", "127.0.0.1:0")
	defer server.Close()
	go func() {
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c) // echo
		}
	}()

	p, err := faultnet.Listen(server.Addr().String())
	if err != nil {
		panic(err)
	}
	defer p.Close()
	c, _ := net.Dial("tcp", p.Addr())
	defer c.Close()
	buf := make([]byte, 5)

	p.Cut()
	io.WriteString(c, "hello")
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Read(buf)
	fmt.Println("under the cut:", err.(net.Error).Timeout())

	p.Heal() // the held bytes go on
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := io.ReadFull(c, buf)
	fmt.Println("after the heal:", string(buf[:n]))
	// Output:
	// under the cut: true
	// after the heal: hello
}
