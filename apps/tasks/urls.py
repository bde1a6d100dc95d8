from django.urls import path

from apps.tasks import views

urlpatterns = [
    path("", views.chat_page, name="chat"),
]
