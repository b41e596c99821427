"""iceduck.puffin"""
