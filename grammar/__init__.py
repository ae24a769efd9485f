"""The Lark grammar of the accepted CFI directives, shipped as package data."""
