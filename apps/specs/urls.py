from django.urls import path

from apps.specs import api

urlpatterns = [
    path("api/specs", api.specs, name="api-specs"),
    path("api/specs/<int:spec_id>", api.spec_detail, name="api-spec"),
    path("api/specs/<int:spec_id>/review", api.spec_review, name="api-spec-review"),
]
