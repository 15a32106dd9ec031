// Command rlctl is the one binary of distrl: it runs workers, a name
// server, and talks to live workers.
package main
