"""A real OpenID Connect provider for the tests: django-oauth-toolkit in a
Django project of its own, run as a separate process on 127.0.0.1
(``serve.py``). Its session and CSRF cookies have names of their own, since
both servers share the host 127.0.0.1 and a browser keeps cookies per host."""
