// Package testpki makes a certificate authority for one test and issues
// loopback certificates from it (ECDSA P-256, valid a day, 127.0.0.1 and
// localhost), written as PEM files in a temporary directory: the CA's
// certificate alone, and each issued certificate with its unencrypted
// PKCS#8 key in one file (the ssl.keystore.location form). Tests only;
// nothing here is fit for real keys. Stdlib only.
package testpki
