"""iceduck.spec"""
