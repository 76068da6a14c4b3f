"""The C++ backend: destination-passing style, the C++ emitter and the build driver.

Not built yet (a later issue); the package exists so the layout of DESIGN.md holds."""
