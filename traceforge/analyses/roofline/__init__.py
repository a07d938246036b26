"""The roofline: what each GPU kernel achieves against its GPU's limits, from the work its
launching CPU op does (``work``), the GPU's limits (``limits``), per kernel (``model``) and as
tables (``tables``). docs/roofline.md has the model and its rules."""
