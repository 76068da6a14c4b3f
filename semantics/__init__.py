"""The meaning of SDQLite: values, the denotational interpreter, conversions, equality."""
