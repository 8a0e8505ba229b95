//! Program flow from the debug trace module's packets over a code image: protocol-free trace elements, and an encoder from retired instructions.
