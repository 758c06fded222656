package oauth

import "testing"

// A client's metadata document is fetched from public addresses only: the
// special-purpose ranges a hostile document URL could resolve to are
// refused with loopback and private ones, IPv4 inside IPv6 included.
func TestDocumentsComeFromPublicAddressesOnly(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "0.1.2.3",
		"100.64.0.1", "100.127.255.254", "198.18.0.1", "198.19.255.1", "192.0.0.8", "240.0.0.1", "255.255.255.255",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::", "fec0::1", "::127.0.0.1", "::ffff:127.0.0.1", "::1", "::",
		"fe80::1", "fd00::1", "ff02::1", "not-an-address"} {
		if isPublic(host) {
			t.Errorf("%s is taken for a public address", host)
		}
	}
	for _, host := range []string{"93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "8.8.8.8"} {
		if !isPublic(host) {
			t.Errorf("%s is refused", host)
		}
	}
}
